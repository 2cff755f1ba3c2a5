"""The fsdp2-param mixed-precision mode in the worker: FSDP2's MixedPrecisionPolicy(param_dtype=bf16,
reduce_dtype=fp32) over fp32 sharded masters, no autocast."""

from __future__ import annotations

import math

import pytest
import torch

from frenzy.train.config import WorkerConfig
from frenzy.train.model import build_model, compute_precision, device_mesh, wrap_data_parallel
from tests.unit.train.dist_helpers import base_config, run_world

MODE = dict(dp=2, zero=3, micro_batch=1, grad_accum=2, precision="bf16-mixed", mixed_precision="fsdp2-param")


def test_worker_config_round_trips_the_mode(tmp_path):
    cfg = WorkerConfig(**base_config(tmp_path, **MODE))
    assert WorkerConfig.from_json(cfg.to_json()) == cfg
    assert WorkerConfig(**base_config(tmp_path)).mixed_precision == "autocast"


def test_parameters_are_fp32_shards_and_forward_runs_in_bf16(tmp_path, fake_world):
    from torch.distributed.tensor import DTensor

    cfg = WorkerConfig(**base_config(tmp_path, **MODE))
    device = torch.device("cpu")
    model = wrap_data_parallel(build_model(cfg), cfg, device_mesh(cfg, "cpu"), device)
    layer = model.model.layers[0]
    at_rest = layer.mlp.up_proj.weight
    assert isinstance(at_rest, DTensor) and at_rest.dtype == torch.float32
    assert at_rest.to_local().shape[0] * 2 == at_rest.shape[0]  # a 1/dp shard
    seen = []
    layer.mlp.up_proj.register_forward_hook(
        lambda module, args, out: seen.append((module.weight.dtype, args[0].dtype, out.dtype)))
    ids = torch.randint(0, 512, (1, 16))
    with compute_precision(cfg, device):
        assert not torch.is_autocast_enabled("cpu")
        loss = model(input_ids=ids, labels=ids, use_cache=False).loss
    loss.backward()
    assert seen == [(torch.bfloat16, torch.bfloat16, torch.bfloat16)]
    grad = layer.mlp.up_proj.weight.grad
    assert grad.dtype == torch.float32 and grad.to_local().shape == at_rest.to_local().shape


def test_autocast_mode_keeps_autocast(tmp_path):
    cfg = WorkerConfig(**base_config(tmp_path, **{**MODE, "mixed_precision": "autocast"}))
    with compute_precision(cfg, torch.device("cpu")):
        assert torch.is_autocast_enabled("cpu")


@pytest.mark.slow
def test_dp2_zero3_trains_in_the_mode(tmp_path):
    cfg = base_config(tmp_path, **MODE, steps=6, learning_rate=3e-3)
    results = run_world(cfg, 2, tmp_path)
    for r in results:
        assert "error" not in r, r["error"]
        losses = [x["loss"] for x in r["reports"]]
        assert [x["step"] for x in r["reports"]] == list(range(1, 7))
        assert all(math.isfinite(x) and x > 0 for x in losses)
        assert min(losses[-2:]) < losses[0], losses


def test_lora_adapters_compute_in_bf16_and_keep_fp32_sharded_gradients(tmp_path, fake_world):
    from torch.distributed.tensor import DTensor

    cfg = WorkerConfig(**base_config(tmp_path, **{**MODE, "zero": 1, "method": "lora"}))
    device = torch.device("cpu")
    model = wrap_data_parallel(build_model(cfg), cfg, device_mesh(cfg, "cpu"), device)
    adapter = model.base_model.model.model.layers[0].self_attn.q_proj.lora_A["default"]
    seen = []
    adapter.register_forward_hook(lambda module, args, out: seen.append(module.weight.dtype))
    ids = torch.randint(0, 512, (1, 16))
    with compute_precision(cfg, device):
        loss = model(input_ids=ids, labels=ids, use_cache=False).loss
    loss.backward()
    assert seen == [torch.bfloat16] and math.isfinite(loss.item())
    grad = adapter.weight.grad
    assert isinstance(grad, DTensor) and grad.dtype == torch.float32

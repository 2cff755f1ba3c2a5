"""ZeRO stages in the worker (train.model.wrap_data_parallel), on a two-rank fake process group:
bf16-mixed ZeRO-1/2 keep each layer's bf16 working weights gathered from its forward to its
backward over fp32 sharded masters (DeepSpeed's bf16 ZeRO-1/2), ZeRO-3 regathers them per layer;
gradients come back as fp32 1/dp shards at every stage (FSDP2's reduce-scatter)."""

from __future__ import annotations

import pytest
import torch

from frenzy.train.config import WorkerConfig
from frenzy.train.model import build_model, compute_precision, device_mesh, wrap_data_parallel
from tests.unit.train.dist_helpers import base_config

MODE = dict(dp=2, micro_batch=1, grad_accum=2, precision="bf16-mixed", mixed_precision="fsdp2-param")


@pytest.mark.parametrize("zero, gathered_after_forward", [(1, True), (2, True), (3, False)])
def test_working_weights_stay_gathered_between_forward_and_backward_below_zero3(tmp_path, fake_world, zero,
                                                                                gathered_after_forward):
    from torch.distributed.tensor import DTensor

    cfg = WorkerConfig(**base_config(tmp_path, **MODE, zero=zero))
    device = torch.device("cpu")
    model = wrap_data_parallel(build_model(cfg), cfg, device_mesh(cfg, "cpu"), device)
    proj = model.model.layers[0].mlp.up_proj
    full_rows = proj.weight.shape[0]
    ids = torch.randint(0, 512, (1, 16))
    with compute_precision(cfg, device):
        loss = model(input_ids=ids, labels=ids, use_cache=False).loss
    between = proj.weight  # what the layer holds after its forward, before its backward
    if gathered_after_forward:
        assert not isinstance(between, DTensor) and between.dtype == torch.bfloat16
        assert between.shape[0] == full_rows  # whole, not a shard
    else:
        assert isinstance(between, DTensor) and between.dtype == torch.float32
    loss.backward()
    master, grad = proj.weight, proj.weight.grad
    assert isinstance(master, DTensor) and master.dtype == torch.float32
    assert master.to_local().shape[0] * 2 == full_rows  # fp32 master: a 1/dp shard
    assert isinstance(grad, DTensor) and grad.dtype == torch.float32
    assert grad.to_local().shape == master.to_local().shape  # gradients sharded at ZeRO-1 too


DBRX = {"model_type": "dbrx", "d_model": 64, "n_heads": 4, "n_layers": 2, "max_seq_len": 256, "vocab_size": 512,
        "attn_config": {"kv_n_heads": 2, "clip_qkv": 8, "rope_theta": 500000},
        # as DBRX's published config writes it: an integer where transformers declares a float
        "ffn_config": {"ffn_hidden_size": 128, "moe_num_experts": 4, "moe_top_k": 2, "moe_normalize_expert_weights": 1}}


def test_the_decoder_layers_the_tracer_profiles_are_the_units_zero3_shards(tmp_path, fake_world):
    # DBRX keeps its layers in transformer.blocks: the worker looked only for `layers` or `h` and
    # refused ZeRO >= 1 ("cannot find the decoder layers"), though the tracer profiles those blocks.
    from torch.distributed.fsdp import FSDPModule

    from frenzy.train.layers import decoder_layers

    cfg = WorkerConfig(**base_config(tmp_path, model_name="small-dbrx", family="dbrx", hf_config=DBRX,
                                     dp=2, zero=3, micro_batch=1))
    model = wrap_data_parallel(build_model(cfg), cfg, device_mesh(cfg, "cpu"), torch.device("cpu"))
    blocks = decoder_layers(model)
    assert blocks is model.transformer.blocks and all(isinstance(block, FSDPModule) for block in blocks)
    ids = torch.randint(0, 512, (1, 16))
    loss = model(input_ids=ids, labels=ids, use_cache=False).loss
    loss.backward()
    assert torch.isfinite(loss)

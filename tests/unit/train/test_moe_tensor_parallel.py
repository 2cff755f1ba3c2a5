"""The worker's split by expert, measured: two gloo ranks run a small Qwen3-MoE (2 layers, 4 experts,
top-2) at tp 2 with the worker's own split (frenzy.train.tensor_parallel), and the live tensor bytes
of a rank's second step (the fake GPU's meter) are held against the fake-tensor trace of that rank
(frenzy.memory.trace.experts) and against MARP, and against what splitting every expert's width
would have allocated, which the measurement must tell apart."""

from __future__ import annotations

import json

import pytest
import torch

from frenzy.core.hf_config import load_model
from frenzy.core.job import JobSpec
from frenzy.core.plan import ParallelPlan
from frenzy.core.training import Precision, TrainingConfig
from frenzy.memory.estimate import estimate
from frenzy.memory.result import Phase
from frenzy.memory.trace.replay import replay
from frenzy.memory.trace.tracer import record_steps
from frenzy.train.config import WorkerConfig

from .dist_helpers import run_function

pytestmark = pytest.mark.slow

# Experts wide and a short vocabulary, so that what the experts keep is most of the step's peak.
MOE = {"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 256,
       "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 16,
       "num_experts": 4, "num_experts_per_tok": 2, "vocab_size": 256, "max_position_embeddings": 512,
       "tie_word_embeddings": False, "bos_token_id": None, "eos_token_id": None, "pad_token_id": None}
SEQ, MICRO_BATCH, TP = 256, 4, 2


def _cfg() -> WorkerConfig:
    return WorkerConfig(job_id="j", attempt=1, model_name="m", family="qwen3_moe", hf_config=MOE, precision="fp32",
                        seq_len=SEQ, global_batch=MICRO_BATCH, micro_batch=MICRO_BATCH, tp=TP, gpu_type="A10G-24G")


def _measure_rank(rank: int) -> dict:
    """One rank of the worker's tp split: its second step's measured peak."""
    from frenzy.train.memory import StepMeter
    from frenzy.train.model import apply_tensor_parallel, build_model, device_mesh
    from frenzy.train.optimization import make_optimizer

    cfg = _cfg()
    torch.manual_seed(0)  # the same weights on both ranks, as a checkpoint load gives
    model = build_model(cfg)
    model.train()
    apply_tensor_parallel(model, device_mesh(cfg, "cpu")["tp"], cfg)
    optimizer = make_optimizer(model, cfg)  # the worker's (per-tensor AdamW under tensor parallelism)
    meter = StepMeter(cfg, model, optimizer)
    generator = torch.Generator().manual_seed(0)  # the same batch on both ranks
    for step in (1, 2):
        with meter.measuring(step):
            ids = torch.randint(0, MOE["vocab_size"], (MICRO_BATCH, SEQ), generator=generator)
            model(input_ids=ids, labels=ids).loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    second = meter.steps[1]
    return {"peak": second.peak_bytes, "phase": second.peak_phase.value, "breakdown": dict(second.peak_breakdown),
            "by_phase": {phase.value: n for phase, n in second.peak_by_phase.items()}}


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> list[dict]:
    results = run_function(_measure_rank, TP, tmp_path_factory.mktemp("moe-tp"))
    for result in results:
        assert "error" not in result, result["error"]
    return results


@pytest.fixture(scope="module")
def config_path(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("moe-config") / "config.json"
    path.write_text(json.dumps(MOE))
    return str(path)


def _traced(path: str, tp: int):
    return replay(record_steps(path, TrainingConfig(precision=Precision.FP32), ParallelPlan(
        micro_batch=MICRO_BATCH, tp=tp), SEQ).log, 1)


def test_both_ranks_measure_the_same_peak(measured):
    assert measured[0]["peak"] == measured[1]["peak"]  # whole experts each, every token on both


def test_the_measured_split_is_the_traced_one(measured, config_path):
    rank, traced = measured[0], _traced(config_path, TP)
    # the trace of one rank (whole local experts, sentinel routing, all tokens) against the worker's
    # DTensor split: the same peak in the same phase, phase by phase (the collectives' outputs and the
    # vocabulary-parallel loss are what the trace leaves out: under 0.1% here)
    assert rank["phase"] == traced.peak_phase.value == Phase.BACKWARD.value
    assert rank["peak"] == pytest.approx(traced.peak_bytes, rel=0.001)
    # (not the optimizer's peak: the worker steps per tensor under tensor parallelism, the trace with
    # foreach kernels, whose temporaries it does not reach here)
    for phase in (Phase.FORWARD, Phase.BACKWARD):
        assert rank["by_phase"][phase.value] == pytest.approx(traced.peak_by_phase[phase], rel=0.002)
    assert rank["breakdown"]["weights"] == pytest.approx(traced.peak_breakdown["weights"], rel=0.001)
    assert rank["breakdown"]["activations"] == pytest.approx(traced.peak_breakdown["activations"], rel=0.002)


def _marp(path: str, tp: int) -> int:
    job = JobSpec(model=load_model(path), training=TrainingConfig(precision=Precision.FP32), seq_len=SEQ,
                  global_batch=MICRO_BATCH)
    return estimate(job, ParallelPlan(micro_batch=MICRO_BATCH, tp=tp)).allocated_bytes


def test_marp_predicts_what_the_split_saves_and_not_a_split_by_width(measured, config_path):
    unsplit = _traced(config_path, 1).peak_bytes
    saved = unsplit - measured[0]["peak"]
    # MARP's own error on this toy shape is the same at tp 1 and 2 (its MoE backward is coarse);
    # what tensor parallelism saves, it predicts within 5%
    assert _marp(config_path, 1) - _marp(config_path, TP) == pytest.approx(saved, rel=0.05)
    # Splitting each expert's width would halve the experts' intermediates of all tokens x top-k rows:
    # per choice the fp32 gate/up output (2 x inter), act(gate) and the product (inter each), in both
    # layers, worked out here; the split by expert keeps them whole, so the rank saves less than that alone.
    k, inter, tokens, layers = MOE["num_experts_per_tok"], MOE["moe_intermediate_size"], SEQ * MICRO_BATCH, 2
    width_split_saving = 4 * (2 + 1 + 1) * (inter // 2) * k * tokens * layers
    assert saved < width_split_saving

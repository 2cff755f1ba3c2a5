"""ZeRO stages as the planner offers them: bf16-mixed ZeRO-1/2 run DeepSpeed's bf16 semantics on
FSDP2 (bf16 working weights gathered from forward to backward over sharded fp32 masters, gradients
and optimizer state). MARP is checked against a hand count from the published parameter count and
against the fake-tensor trace of the real `fully_shard` (memory.trace.fsdp)."""

import pytest

from frenzy.core.hf_config import load_model
from frenzy.core.job import JobSpec
from frenzy.core.plan import MixedPrecisionMode, ParallelPlan
from frenzy.core.training import Method, Precision, TrainingConfig, ZeroStage
from frenzy.memory.estimate import estimate
from frenzy.memory.plans import leaner_precision_mode
from frenzy.memory.states import optimizer_state_bytes, stage_params, weight_bytes
from frenzy.memory.zero import zero_sharding

def _job(model="meta-llama/Llama-3.1-8B", **training):
    return JobSpec(model=load_model(model), training=TrainingConfig(**training), seq_len=2048, global_batch=64)


@pytest.mark.parametrize("stage", [ZeroStage.OPTIMIZER, ZeroStage.GRADIENTS])
def test_bf16_mixed_zero_1_and_2_shard_masters_gradients_and_optimizer_state(stage):
    job = _job()
    plan, memory = leaner_precision_mode(job, ParallelPlan(dp=8, zero=stage, micro_batch=1, grad_accum=8))
    assert plan.mixed_precision is MixedPrecisionMode.FSDP2_PARAM
    n = 8.03e9  # Llama-3.1-8B's published parameter count
    # fp32 master shard (4 B / 8) + every layer's bf16 working weights gathered (2 B, all but the
    # root's embedding, which is gathered too while the root runs): about 2 + 0.5 B per parameter
    assert memory.breakdown["weights"] == pytest.approx(4 * n / 8 + 2 * n, rel=0.02)
    assert memory.breakdown["optimizer_state"] == pytest.approx(8 * n / 8, rel=0.01)  # AdamW's two fp32 moments
    # model states: 2 B of gathered bf16 weights + 16 B / dp of fp32 masters, gradients and moments
    # (32 GB), where replicated fp32 weights and gradients alone would be 8 B/param (64 GB)
    states = sum(memory.breakdown[t] for t in ("weights", "gradients", "optimizer_state"))
    assert (2 + 12 / 8) * n <= states <= (2 + 16 / 8) * n * 1.01


def test_the_sharding_words_follow_the_bytes():
    job = _job()
    params = stage_params(job.model, job.training, ParallelPlan(), 0)
    for stage in ZeroStage:
        for mode in MixedPrecisionMode:
            if mode is MixedPrecisionMode.FSDP2_PARAM and stage is ZeroStage.NONE:
                continue
            plan = ParallelPlan(dp=8, zero=stage, mixed_precision=mode)
            words = zero_sharding(job.training, plan)
            whole = ParallelPlan(dp=1)
            opt_sharded = optimizer_state_bytes(params, job.training, plan) * 8 == \
                optimizer_state_bytes(params, job.training, whole)
            assert ("optimizer state" in words.sharded) == opt_sharded
            stored = weight_bytes(params, job.training, plan) < weight_bytes(params, job.training, whole) / 2
            assert any("weights" in s for s in words.sharded) == stored
    assert "shards nothing" not in zero_sharding(job.training, ParallelPlan(dp=1)).describe()
    assert zero_sharding(job.training, ParallelPlan(dp=1)).describe().startswith("dp 1: nothing to shard")


def test_fp16_mixed_and_qlora_zero_1_2_stay_autocast():
    for training in (dict(precision=Precision.FP16_MIXED), dict(method=Method.QLORA)):
        plan, _ = leaner_precision_mode(_job(**training), ParallelPlan(dp=4, zero=ZeroStage.GRADIENTS))
        assert plan.mixed_precision is MixedPrecisionMode.AUTOCAST


@pytest.mark.parametrize("model, dp, mb, accum, method", [
    pytest.param("meta-llama/Llama-3.2-1B", 4, 4, 1, "full", marks=pytest.mark.slow),
    ("openai-community/gpt2", 2, 2, 2, "full"),
    ("Qwen/Qwen2.5-0.5B", 2, 4, 1, "lora"),
])
def test_zero2_marp_matches_the_fsdp2_trace_within_one_percent(model, dp, mb, accum, method):
    pytest.importorskip("torch")
    from frenzy.memory.validation import _case, compare

    case = _case(model, dp=dp, zero=2, mb=mb, accum=accum, method=method, mixed="fsdp2-param",
                 targets=("all-linear",) if method == "lora" else ("q", "v"))
    job = JobSpec(model=load_model(model), training=case.training, seq_len=case.seq_len, global_batch=64)
    assert leaner_precision_mode(job, case.plan)[0].mixed_precision is case.plan.mixed_precision  # what is offered
    result = compare(case)
    assert abs(result.peak_error) <= 0.01, (result.formula.allocated_bytes, result.traced.allocated_bytes)
    for term in ("weights", "gradients", "optimizer_state"):
        assert result.formula.breakdown[term] == pytest.approx(result.traced.breakdown[term], rel=0.01, abs=4096)

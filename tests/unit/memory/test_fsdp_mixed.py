"""The fsdp2-param mixed-precision mode (FSDP2 MixedPrecisionPolicy(bf16, fp32)) in the plan, MARP
and the planner. Its agreement with the real FSDP2 traced at dp 2/4 is tests/validation (fast
cases) and `python bench/trace_validation.py --fsdp-mixed` (docs/ACCURACY.md)."""

from dataclasses import replace

import pytest

from frenzy.core import catalog
from frenzy.core.hf_config import load_model
from frenzy.core.job import JobSpec
from frenzy.core.plan import MixedPrecisionMode, ParallelPlan
from frenzy.core.training import Method, Precision, TrainingConfig, ZeroStage
from frenzy.memory.estimate import estimate
from frenzy.memory.plans import leaner_precision_mode, plan_job

MODE = MixedPrecisionMode.FSDP2_PARAM


def job(model="llama-3.1-8b", batch=16, seq=2048, **training):
    return JobSpec(model=load_model(model), training=TrainingConfig(**training), seq_len=seq, global_batch=batch)


def test_the_mode_needs_fsdp2_sharding():
    with pytest.raises(ValueError, match="dp > 1 with ZeRO >= 1"):
        ParallelPlan(dp=4, mixed_precision=MODE)
    # one rank shards nothing: the plan is canonical autocast, as ZeRO becomes 0
    assert ParallelPlan(dp=1, zero=ZeroStage.PARAMETERS, mixed_precision=MODE) == ParallelPlan()
    assert ParallelPlan(dp=2, zero=ZeroStage.OPTIMIZER, mixed_precision=MODE).describe().endswith("mp-fsdp2")
    assert MixedPrecisionMode.parse("fsdp2-param") is MODE
    with pytest.raises(ValueError, match="autocast, fsdp2-param"):
        MixedPrecisionMode.parse("fsdp1")


@pytest.mark.parametrize("training, refused", [
    (dict(precision=Precision.FP16_MIXED), "bf16-mixed only"),
    (dict(precision=Precision.BF16), "bf16-mixed only"),
    (dict(method=Method.QLORA), "QLoRA"),
])
def test_the_mode_runs_bf16_mixed_full_or_lora_only(training, refused):
    with pytest.raises(ValueError, match=refused):
        estimate(job(**training), ParallelPlan(dp=4, zero=ZeroStage.PARAMETERS, mixed_precision=MODE))


def test_states_are_sharded_at_every_zero_stage_and_no_autocast_copies():
    j = job()
    n = j.model.num_params
    for zero in (ZeroStage.OPTIMIZER, ZeroStage.GRADIENTS, ZeroStage.PARAMETERS):
        m = estimate(j, ParallelPlan(dp=8, zero=zero, mixed_precision=MODE, micro_batch=1, grad_accum=2))
        # fp32 sharded gradients alive through accumulation (4 B / dp), AdamW's fp32 moments (8 B / dp)
        assert m.breakdown["optimizer_state"] == pytest.approx(8 * n / 8, rel=0.01)
        assert m.breakdown["gradients"] == pytest.approx(4 * n / 8, rel=0.01)


def test_zero3_keeps_fewer_gathered_layers_than_zero1():
    j = job()
    keep = estimate(j, ParallelPlan(dp=8, zero=ZeroStage.OPTIMIZER, mixed_precision=MODE))
    reshard = estimate(j, ParallelPlan(dp=8, zero=ZeroStage.PARAMETERS, mixed_precision=MODE))
    assert reshard.allocated_bytes < keep.allocated_bytes


def test_the_planner_keeps_the_leaner_mode_per_plan():
    j = job(batch=16, seq=4096)
    for plan in (ParallelPlan(dp=8, zero=ZeroStage.OPTIMIZER, micro_batch=2),
                 ParallelPlan(dp=8, zero=ZeroStage.PARAMETERS, micro_batch=2)):
        chosen, memory = leaner_precision_mode(j, plan)
        autocast = estimate(j, plan).required_bytes
        variant = estimate(j, replace(plan, mixed_precision=MODE)).required_bytes
        assert memory.required_bytes == min(autocast, variant)
        assert chosen.fsdp_param_dtype == (variant < autocast)
    # autocast keeps an fp32 residual stream and a 16-bit copy of every weight: at 8B and 4k
    # tokens the bf16 mode needs less, so sharded plans take it
    choices = plan_job(j, [catalog.gpu_type("H100-SXM-80G")])
    assert any(c.plan.fsdp_param_dtype for c in choices if c.plan.dp > 1 and c.plan.zero)
    assert all(c.to_json()["mixed_precision"] in ("autocast", "fsdp2-param") for c in choices)


def test_fp16_mixed_and_unsharded_plans_stay_autocast():
    plan = ParallelPlan(dp=8, zero=ZeroStage.PARAMETERS, micro_batch=2)
    assert not leaner_precision_mode(job(precision=Precision.FP16_MIXED), plan)[0].fsdp_param_dtype
    assert not leaner_precision_mode(job(), ParallelPlan(dp=8, micro_batch=2))[0].fsdp_param_dtype

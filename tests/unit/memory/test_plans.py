"""Plan enumeration: every plan fits, reaches the global batch, and respects the hardware; facts
that are published hold (a 70B model cannot be fully fine-tuned on one 80 GB GPU; LoRA on a 7B
model fits a 40 GB A100, as LitGPT measured 21.3 GB)."""

import pytest

from frenzy.core import catalog
from frenzy.core.errors import NoFeasiblePlanError
from frenzy.core.hf_config import load_model
from frenzy.core.job import JobSpec
from frenzy.core.training import Method, Precision, TrainingConfig
from frenzy.core.plan import ParallelPlan
from frenzy.memory.plans import DEFAULT_SAFETY_MARGIN, check_plan, plan_job

ALL_GPUS = list(catalog.gpu_types().values())


def job(model, batch=32, seq=2048, **training):
    return JobSpec(model=load_model(model), training=TrainingConfig(**training), seq_len=seq, global_batch=batch)


@pytest.mark.parametrize("model", ["llama-3.1-8b", "qwen2.5-14b", "mixtral-8x7b-v0.1", "gpt2-xl"])
def test_every_plan_fits_and_reaches_the_global_batch(model):
    j = job(model, seq=1024)
    choices = plan_job(j, ALL_GPUS)
    assert choices
    for c in choices:
        assert c.memory.required_bytes <= c.gpu.memory_bytes * (1 - DEFAULT_SAFETY_MARGIN)
        assert c.plan.global_batch == j.global_batch
        assert c.plan.tp <= c.gpu.gpus_per_node
        assert j.model.num_heads % c.plan.tp == 0


def test_seventy_billion_full_fine_tuning_needs_more_than_one_gpu():
    choices = plan_job(job("llama-2-70b", batch=8), [catalog.gpu_type("H100-SXM-80G")])
    assert min(c.num_gpus for c in choices) > 1


def test_lora_seven_billion_fits_one_a100_40g():
    j = job("llama-2-7b", batch=8, seq=1024, method=Method.LORA, precision=Precision.BF16)
    choices = plan_job(j, [catalog.gpu_type("A100-SXM-40G")])
    assert choices[0].num_gpus == 1


def test_pure_bf16_is_never_planned_on_gpus_without_bf16():
    j = job("llama-3.2-1b", precision=Precision.BF16)
    choices = plan_job(j, [catalog.gpu_type("V100-SXM-32G"), catalog.gpu_type("A10-24G")])
    assert {c.gpu.name for c in choices} == {"A10-24G"}


def test_more_gpus_never_needed_on_a_bigger_gpu_of_the_same_kind():
    j = job("llama-3.1-8b")
    choices = plan_job(j, [catalog.gpu_type("A100-SXM-40G"), catalog.gpu_type("A100-SXM-80G")])
    fewest = {name: min(c.num_gpus for c in choices if c.gpu.name == name) for name in ("A100-SXM-40G", "A100-SXM-80G")}
    assert fewest["A100-SXM-80G"] <= fewest["A100-SXM-40G"]


def test_job_that_fits_nowhere_explains_what_would_help():
    with pytest.raises(NoFeasiblePlanError, match="needs .* GiB per GPU"):
        plan_job(job("llama-3.1-405b", batch=8, precision=Precision.FP16_MIXED), [catalog.gpu_type("T4-16G")], max_gpus=8)


def test_every_planned_plan_passes_the_layout_check_and_sequence_parallelism_needs_a_divisible_sequence():
    # 2047 tokens cannot be split over any tp > 1 (Megatron's sequence parallelism shards the
    # sequence dimension evenly), so tensor-parallel plans run without it.
    j = job("llama-3.1-8b", batch=8, seq=2047)
    choices = plan_job(j, [catalog.gpu_type("A100-SXM-40G")])
    assert any(c.plan.tp > 1 for c in choices)
    for c in choices:
        check_plan(j, c.plan)
        assert not c.plan.sequence_parallel
    found = plan_job(job("llama-3.1-8b", batch=8), [catalog.gpu_type("A100-SXM-40G")], include_unrunnable=True)
    assert any(c.plan.sequence_parallel for c in found)


@pytest.mark.parametrize("plan, says", [
    (ParallelPlan(tp=3), r"tp 3 does not split 32 heads / 8 KV heads / MLP width 14336; use one of 1, 2, 4, 8, 16, 32"),
    (ParallelPlan(pp=64), "pp 64 is more stages than the model's 32 layers"),
    (ParallelPlan(tp=2, sequence_parallel=True), r"sequence length \(2047\) divisible by tp 2"),
])
def test_a_plan_that_cannot_lay_out_the_model_says_what_to_change(plan, says):
    with pytest.raises(ValueError, match=says):
        check_plan(job("llama-3.1-8b", seq=2047), plan)
    check_plan(job("llama-3.1-8b", seq=2048), ParallelPlan(tp=8, pp=32, sequence_parallel=True))


@pytest.mark.parametrize("model, method", [("llama-3.1-8b", Method.FULL), ("mixtral-8x7b-v0.1", Method.FULL),
                                           ("gpt2-xl", Method.FULL), ("qwen2.5-14b", Method.LORA),
                                           ("llama-3.1-8b", Method.QLORA)])
def test_the_model_state_floor_that_skips_shapes_is_below_every_estimate(model, method):
    # Enumeration skips a GPU type for a shape whose floor exceeds the type's room without estimating
    # any micro-batch: exact only if no estimate of the shape falls below its floor.
    from itertools import product

    from frenzy.core.plan import MixedPrecisionMode, supports_fsdp_param_dtype
    from frenzy.core.training import Recompute, ZeroStage
    from frenzy.memory.estimate import estimate, model_state_floor_bytes

    j = job(model, batch=16, seq=1024, method=method)
    checked = 0
    for dp, tp, pp, zero, rc, micro in product((1, 4), (1, 2), (1, 2), ZeroStage, (Recompute.NONE, Recompute.FULL),
                                               (1, 2)):
        shape = ParallelPlan(dp=dp, tp=tp, pp=pp, zero=zero, recompute=rc, micro_batch=micro,
                             grad_accum=16 // dp // micro)
        modes = [MixedPrecisionMode.AUTOCAST]
        if supports_fsdp_param_dtype(j.training, shape):
            modes.append(MixedPrecisionMode.FSDP2_PARAM)
        for mode in modes:
            plan = ParallelPlan(dp=dp, tp=tp, pp=pp, zero=zero, recompute=rc, micro_batch=micro,
                                grad_accum=16 // dp // micro, mixed_precision=mode)
            floor = model_state_floor_bytes(j, plan)
            assert 0 < floor <= estimate(j, plan).allocated_bytes, plan
            checked += 1
    assert checked > 64

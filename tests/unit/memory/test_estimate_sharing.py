"""Plan enumeration compares micro-batches by the required bytes of their peak (estimate.peak) and
builds a MemoryEstimate only for the plans it keeps, shared between GPU types. Neither may change a
number: the bytes compared are the bytes the estimate reports, and every plan carries its own estimate."""

from dataclasses import replace
from itertools import product

import pytest

from frenzy.core import catalog
from frenzy.core.hf_config import load_model
from frenzy.core.job import JobSpec
from frenzy.core.plan import MixedPrecisionMode, ParallelPlan, supports_fsdp_param_dtype
from frenzy.core.training import Method, Recompute, TrainingConfig, ZeroStage
from frenzy.memory import estimate as marp
from frenzy.memory.plans import enumerate_plans


def _plans(training: TrainingConfig, per_rank_batch: int = 8):
    """Every shape on 8 GPUs (dp x tp x pp, ZeRO, recomputation, sequence parallelism, both
    mixed-precision modes where they apply) at every micro-batch that divides the rank's batch."""
    for tp, pp in product((1, 2), (1, 2, 4)):
        dp = 8 // (tp * pp)
        for zero, rc, sp, micro in product(ZeroStage if dp > 1 else [ZeroStage.NONE],
                                           (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL),
                                           (False, True) if tp > 1 else (False,), (1, 2, 4, 8)):
            plan = ParallelPlan(dp=dp, tp=tp, pp=pp, zero=zero, recompute=rc, sequence_parallel=sp,
                                micro_batch=micro, grad_accum=per_rank_batch // micro)
            yield plan
            if supports_fsdp_param_dtype(training, plan):
                yield ParallelPlan(dp=dp, tp=tp, pp=pp, zero=zero, recompute=rc, sequence_parallel=sp,
                                   micro_batch=micro, grad_accum=per_rank_batch // micro,
                                   mixed_precision=MixedPrecisionMode.FSDP2_PARAM)


def _other_mode(plan: ParallelPlan) -> ParallelPlan:
    other = {MixedPrecisionMode.AUTOCAST: MixedPrecisionMode.FSDP2_PARAM,
             MixedPrecisionMode.FSDP2_PARAM: MixedPrecisionMode.AUTOCAST}[plan.mixed_precision]
    return replace(plan, mixed_precision=other)


@pytest.mark.parametrize("model, method, batch", [("meta-llama/Llama-3.1-8B", Method.FULL, 64),
                                                  ("Qwen/Qwen3-30B-A3B", Method.LORA, 32),
                                                  ("google/gemma-3-4b-pt", Method.QLORA, 16)])
def test_every_enumerated_plan_carries_its_own_estimate_in_its_leaner_mode(model, method, batch):
    # Enumeration compares micro-batches by required bytes, keeps one estimate per micro-batch kept
    # and shares it between GPU types: each plan must still carry exactly estimate(job, plan).
    training = TrainingConfig(method=method)
    job = JobSpec(model=load_model(model), training=training, seq_len=2048, global_batch=batch)
    choices = enumerate_plans(job, list(catalog.gpu_types().values()), include_unrunnable=True)
    assert len({c.plan.pp for c in choices}) > 1 or method is not Method.FULL
    for c in choices:
        assert c.memory.to_json() == marp.estimate(job, c.plan).to_json(), c.plan.describe()
        if supports_fsdp_param_dtype(training, c.plan) and c.plan.zero is ZeroStage.PARAMETERS:
            other = marp.estimate(job, _other_mode(c.plan)).required_bytes
            # the lower required bytes, autocast on a tie (plans.leaner_precision_mode)
            assert c.memory.required_bytes < other or \
                (c.memory.required_bytes == other and not c.plan.fsdp_param_dtype), c.plan.describe()
    assert len(choices) > 50


def test_the_bytes_enumeration_compares_are_the_estimates_required_bytes():
    training = TrainingConfig()
    job = JobSpec(model=load_model("Qwen/Qwen3-0.6B"), training=training, seq_len=2048, global_batch=64)
    for plan in _plans(training):
        phase, parts = marp.peak(job, plan)
        memory = marp.estimate(job, plan)
        # required = allocated + runtime overhead, the allocator's cached slack left out (result.py)
        assert marp.peak_required_bytes(plan, parts) == memory.allocated_bytes + \
            memory.breakdown["runtime_overhead"] == memory.required_bytes
        assert (phase, sum(parts)) == (memory.peak_phase, memory.allocated_bytes)

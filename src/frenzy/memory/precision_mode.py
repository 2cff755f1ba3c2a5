"""Which mixed-precision mode a plan runs in, and its peak in that mode.

A bf16-mixed job on an FSDP2-sharded plan (dp > 1, ZeRO >= 1, no QLoRA) can run autocast or FSDP2's
MixedPrecisionPolicy (fsdp2-param); plan enumeration offers one of them per plan shape. It compares
the modes by the required bytes of their peaks (memory.estimate.peak) and builds a MemoryEstimate
only for the plans it keeps.
"""

from __future__ import annotations

from frenzy.core.job import JobSpec
from frenzy.core.plan import MixedPrecisionMode, ParallelPlan, supports_fsdp_param_dtype
from frenzy.core.training import ZeroStage
from frenzy.memory.estimate import estimate_at_peak, model_state_floor_bytes, peak, peak_required_bytes
from frenzy.memory.result import MemoryEstimate, Phase

Peak = tuple[ParallelPlan, Phase, tuple[int, ...], int]  # plan, peak phase, peak parts, required bytes


def plan_peak(job: JobSpec, plan: ParallelPlan) -> Peak:
    phase, parts = peak(job, plan)
    return plan, phase, parts, peak_required_bytes(plan, parts)


def leaner_peak(job: JobSpec, plan: ParallelPlan) -> Peak:
    """The peak of `plan` in the mode it runs in (leaner_precision_mode), without its MemoryEstimate."""
    if not supports_fsdp_param_dtype(job.training, plan):
        return plan_peak(job, plan)
    other = plan_peak(job, plan.varied(mixed_precision=MixedPrecisionMode.FSDP2_PARAM))
    if plan.zero < ZeroStage.PARAMETERS:
        return other
    own = plan_peak(job, plan)
    return other if other[3] < own[3] else own


def leaner_precision_mode(job: JobSpec, plan: ParallelPlan) -> tuple[ParallelPlan, MemoryEstimate]:
    """`plan` in the mixed-precision mode it runs in, with its estimate.
    - ZeRO-1/2 always run fsdp2-param: DeepSpeed's bf16 ZeRO-1/2 semantics, bf16 working weights
      kept gathered from forward to backward over sharded fp32 masters, gradients and optimizer
      state (memory.fsdp_mixed). Under autocast the worker's FSDP2 would keep fp32 weights gathered.
    - ZeRO-3 keeps the mode with the lower required bytes (autocast on a tie), so the plan space
      does not double and the ranking compares plans, not precision modes."""
    chosen, phase, parts, _ = leaner_peak(job, plan)
    return chosen, estimate_at_peak(chosen, phase, parts)


def model_state_floor(job: JobSpec, shape: ParallelPlan) -> int:
    """Bytes every micro-batch of `shape` needs at least, in whichever mode it would run
    (leaner_precision_mode): a GPU type with less room fits none of them, so it costs no estimate."""
    floor = model_state_floor_bytes(job, shape)
    if supports_fsdp_param_dtype(job.training, shape):
        floor = min(floor, model_state_floor_bytes(job, shape.varied(mixed_precision=MixedPrecisionMode.FSDP2_PARAM)))
    return floor

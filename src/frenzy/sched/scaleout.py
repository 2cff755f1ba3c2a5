"""Scale-out variants of MARP's plans: the same layout with 2x, 4x, 8x the data-parallel degree.

MARP lists, per GPU type, the plans at the smallest GPU counts that fit. On an idle cluster a job
finishes sooner on more GPUs, so HAS also gets data-parallel scale-outs of those plans, each kept
only if the perf model predicts at least MIN_SCALING_EFFICIENCY of linear speed-up (otherwise the
extra GPUs are mostly waste). More data parallelism never raises per-GPU memory (fewer accumulation
steps or a smaller micro-batch; ZeRO shards further), but each variant is re-estimated and checked
against the same safety margin anyway.
"""

from __future__ import annotations

from dataclasses import replace
from math import ceil

from frenzy.core.job import JobSpec
from frenzy.memory.estimate import estimate
from frenzy.memory.plans import PlanChoice
from frenzy.perf.step import step_time
from frenzy.sched.configs import peak_bytes

SCALE_FACTORS = (2, 4, 8, 16, 32, 64)
MIN_SCALING_EFFICIENCY = 0.75


def scaled_plan(choice: PlanChoice, factor: int):
    """The plan with dp x factor: fewer accumulation steps, and a smaller micro-batch once there is
    one step left per rank; None if the global batch does not split so."""
    plan = choice.plan
    per_rank = plan.micro_batch * plan.grad_accum
    if per_rank % factor:
        return None
    per_rank //= factor
    micro = min(plan.micro_batch, per_rank)
    if per_rank % micro or (plan.pp > 1 and per_rank // micro < plan.pp):
        return None
    return replace(plan, dp=plan.dp * factor, micro_batch=micro, grad_accum=per_rank // micro)


def with_scale_out(spec: JobSpec, choices: list[PlanChoice], capacity: dict[str, int],
                   max_gpus: int) -> list[PlanChoice]:
    """`choices` plus their worthwhile scale-outs that fit each type's capacity and `max_gpus`."""
    seen = {(c.gpu.name, c.plan) for c in choices}
    out = list(choices)
    for choice in choices:
        base = step_time(spec, choice.plan, choice.gpu).total_s
        for factor in SCALE_FACTORS:
            plan = scaled_plan(choice, factor)
            if plan is None or plan.num_gpus > min(max_gpus, capacity.get(choice.gpu.name, 0)):
                continue
            if (choice.gpu.name, plan) in seen:
                continue
            nodes = ceil(plan.num_gpus / choice.gpu.gpus_per_node)
            speedup = base / step_time(spec, plan, choice.gpu, nodes=nodes).total_s
            if speedup < MIN_SCALING_EFFICIENCY * factor:
                break  # larger factors scale no better
            memory = estimate(spec, plan)
            if peak_bytes(memory) > choice.usable_bytes:
                continue
            seen.add((choice.gpu.name, plan))
            out.append(PlanChoice(gpu=choice.gpu, plan=plan, memory=memory, usable_bytes=choice.usable_bytes))
    return out

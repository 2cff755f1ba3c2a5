"""What HAS computes once per job shape: predicted seconds per step of each plan, the plans a job may
use, and those plans by GPU type. Jobs of one shape share their MARP plan tuple, so its id names
the shape; the caches live across scheduling calls.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from frenzy.memory.plans import PlanChoice
from frenzy.sched.assignment import plan_grid
from frenzy.sched.configs import duration_s
from frenzy.sched.lean import fewest_by_type, lean_by_type, lean_plans
from frenzy.sched.types import QueuedJob

_PER_SHAPE_LIMIT = 20_000
_STEP_SECONDS: dict[int, tuple] = {}
_OPTIONS: dict[tuple, tuple] = {}
_USABLE: dict[tuple, tuple] = {}
_GRIDS: dict[tuple, tuple] = {}
_FASTER: dict[tuple, tuple] = {}


def _per_shape(cache: dict, compute, job: QueuedJob, *args):
    """`compute(job, *args)` once per job shape: jobs of one shape share their plan tuple, so its
    id (plus `args`) names the shape. The entry keeps the tuple alive so its id cannot be reused."""
    key = (id(job.plans), *args) if args else id(job.plans)
    entry = cache.get(key)
    if entry is None or entry[0] is not job.plans:
        if len(cache) > _PER_SHAPE_LIMIT:
            cache.clear()
        entry = cache[key] = (job.plans, compute(job, *args))
    return entry[1]


def step_seconds(job: QueuedJob) -> dict:
    """Predicted seconds per step of each of the job's plans, by id(plan) (and "min_gpus": the
    fewest GPUs any of them needs; "fastest": the least seconds per step of any, "fastest_by_type"
    of any of each GPU type; "leanest_gpu_s": the least GPU-seconds per step of any;
    "leanest_step_s": that plan's seconds per step; "lean_plans" and "fewest_by_type": frenzy.sched.lean's
    functions of those names, of its lean_by_type)."""
    entry = _STEP_SECONDS.get(id(job.plans))  # _per_shape's lookup, inlined: the hottest call in HAS
    if entry is not None and entry[0] is job.plans:
        return entry[1]
    return _per_shape(_STEP_SECONDS, _compute_step_seconds, job)


def _compute_step_seconds(job: QueuedJob) -> dict:
    one_step = replace(job.spec, steps=1)
    seconds = {id(c): duration_s(one_step, c) for c in job.plans}
    seconds["min_gpus"] = min((c.num_gpus for c in job.plans), default=0)
    seconds["fastest"] = min((seconds[id(c)] for c in job.plans), default=float("inf"))
    fastest_by_type: dict[str, float] = {}
    for c in job.plans:
        fastest_by_type[c.gpu.name] = min(fastest_by_type.get(c.gpu.name, seconds[id(c)]), seconds[id(c)])
    seconds["fastest_by_type"] = fastest_by_type
    leanest = min(job.plans, key=lambda c: seconds[id(c)] * c.num_gpus, default=None)
    seconds["leanest_gpu_s"] = float("inf") if leanest is None else seconds[id(leanest)] * leanest.num_gpus
    seconds["leanest_step_s"] = float("inf") if leanest is None else seconds[id(leanest)]
    by_type = lean_by_type(job.plans, seconds)
    seconds["lean_plans"] = lean_plans(job.plans, seconds, by_type)
    seconds["fewest_by_type"] = fewest_by_type(by_type)
    return seconds


def usable_plans(job: QueuedJob) -> Sequence[PlanChoice]:
    """The job's plans minus excluded types; once per job shape, so jobs of one shape share the list."""
    return _per_shape(_USABLE, _compute_usable_plans, job, job.excluded_gpu_types)


def _compute_usable_plans(job: QueuedJob, excluded: tuple[str, ...]) -> list:
    return [c for c in job.plans if c.gpu.name not in excluded]


def faster_plans(job: QueuedJob, rank: int) -> list:
    """The job's usable plans faster per step than its `rank`-th usable plan, in their order; once
    per job shape and rank."""
    return _per_shape(_FASTER, _compute_faster_plans, job, job.excluded_gpu_types, rank)


def _compute_faster_plans(job: QueuedJob, _excluded, rank: int) -> list:
    seconds, plans = step_seconds(job), usable_plans(job)
    return [c for c in plans if seconds[id(c)] < seconds[id(plans[rank])]]


def plan_grid_of(job: QueuedJob, types: tuple[str, ...]) -> tuple:
    """The job's usable plans by GPU type (frenzy.sched.assignment.plan_grid), once per job shape."""
    return _per_shape(_GRIDS, _compute_grid, job, job.excluded_gpu_types, types)


def _compute_grid(job: QueuedJob, _excluded, types: tuple[str, ...]) -> tuple:
    return plan_grid(usable_plans(job), step_seconds(job), types)


def plan_options(job: QueuedJob) -> list:
    """The job's usable plans as (plan, GPUs, seconds per step), once per job shape."""
    return _per_shape(_OPTIONS, _compute_plan_options, job, job.excluded_gpu_types)


def _compute_plan_options(job: QueuedJob, _excluded) -> list:
    seconds = step_seconds(job)
    return [(c, c.num_gpus, seconds[id(c)]) for c in usable_plans(job)]

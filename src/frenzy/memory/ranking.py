"""Orders in which a job's feasible plans are offered to the scheduler (first = preferred).

A ranking is a key function over PlanChoice, built per job by `rank_key(objective, job)`:
  time  predicted finish time on an idle cluster (steps x frenzy.perf step time), fewest GPUs on ties;
  cost  predicted GPU-hours x the type's price per GPU-hour, then the finish time.
Without a job, plans.rank_by_gpus_then_headroom is the proxy.
"""

from __future__ import annotations

from typing import Callable

from frenzy.core.job import JobSpec
from frenzy.memory.plans import PlanChoice, RankKey, rank_by_gpus_then_headroom
from frenzy.perf.step import step_time

__all__ = ["rank_by_gpus_then_headroom", "rank_key", "predicted_duration_s", "predicted_cost_usd"]


def predicted_duration_s(job: JobSpec, choice: PlanChoice) -> float:
    """Seconds the job's steps take under this plan (frenzy.perf), start-up not included."""
    return job.steps * step_time(job, choice.plan, choice.gpu).total_s


def predicted_cost_usd(job: JobSpec, choice: PlanChoice) -> float:
    """GPU-hours x the catalog's price per GPU-hour."""
    return predicted_duration_s(job, choice) / 3600 * choice.num_gpus * choice.gpu.price_per_gpu_hour_usd


def _by_finish_time(job: JobSpec) -> RankKey:
    return lambda c: (predicted_duration_s(job, c), c.num_gpus, -c.headroom_fraction, c.gpu.name)


def _by_cost(job: JobSpec) -> RankKey:
    return lambda c: (predicted_cost_usd(job, c), predicted_duration_s(job, c), c.gpu.name)


RANK_FACTORIES: dict[str, Callable[[JobSpec], RankKey]] = {"time": _by_finish_time, "cost": _by_cost}


def check_objective(objective: str) -> None:
    """ValueError listing the objectives when `objective` is none of them."""
    if objective not in RANK_FACTORIES:
        raise ValueError(f"unknown objective '{objective}'; choose one of: {', '.join(RANK_FACTORIES)}")


def rank_key(objective: str, job: JobSpec) -> RankKey:
    """The ranking key of `objective` for this job; ValueError listing the objectives otherwise."""
    check_objective(objective)
    return RANK_FACTORIES[objective](job)


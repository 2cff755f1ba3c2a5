"""Placing a job the way its user asked for it: the requested GPU count, on one GPU type.

Shared by the baselines that do not reason about memory (fifo, opportunistic, gavel): they run the
user's own plan for that configuration (frenzy.sched.configs) whether or not it fits.
"""

from __future__ import annotations

from frenzy.sched.configs import config_choice
from frenzy.sched.pool import FreePool
from frenzy.sched.types import ClusterState, Place, QueuedJob


def requested_gpus(job: QueuedJob) -> int:
    return max(1, job.requested_gpus or 1)


def type_order(state: ClusterState) -> list[str]:
    """GPU types in the order the cluster lists their nodes ("whichever comes first")."""
    return list(dict.fromkeys(node.gpu_type for node in state.nodes))


def allowed_types(job: QueuedJob, state_types: list[str]) -> list[str]:
    """The requested type if any (and present), else every type the job has not been excluded from."""
    if job.requested_gpu_type:
        return [job.requested_gpu_type] if job.requested_gpu_type in state_types else []
    return [t for t in state_types if t not in job.excluded_gpu_types]


def place_request(job: QueuedJob, gpu_type: str, pool: FreePool, gpus: int | None = None) -> Place | None:
    """The user's plan on `gpus` (default: requested) GPUs of `gpu_type`, placed best-fit, or None."""
    gpus = gpus or requested_gpus(job)
    if not pool.fits_total(gpu_type, gpus):
        return None
    config = config_choice(job.spec, gpu_type, gpus, pool.widest[gpu_type], pool.links[gpu_type])
    if config is None:
        return None
    allocation = pool.find(gpu_type, gpus, config.choice.plan.tp)
    if allocation is None:
        return None
    return Place(job_id=job.job_id, choice=config.choice, allocation=allocation)

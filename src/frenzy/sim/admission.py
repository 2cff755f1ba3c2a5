"""Jobs a policy can never run on a cluster: found when the trace is loaded, and why.

A job is put to the policy once on the idle cluster (under another id, so the policy's state about
the real job is untouched; the verdict is cached by the job's shape, request and excluded types).
A policy that places it nowhere on an idle cluster never will, wherever the other jobs are: the job
is rejected for that policy instead of waiting for ever (and, in a strict FIFO, blocking every job
behind it). Why is read off the job and the cluster (`obstacle`): a requested GPU type the cluster
lacks or that lacks the job's precision, a request larger than any one type here, every type
excluded after out-of-memory failures. A policy that ignores the request (Frenzy plans its own
GPUs; Sia picks counts up to twice the request on any type) runs such a job; one that keeps it
(fifo, opportunistic: count and type; gavel: count) rejects it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from frenzy.core.gpu import GpuType
from frenzy.sched.registry import Policy
from frenzy.sched.requests import requested_gpus
from frenzy.sched.types import ClusterState, NodeState, Place, QueuedJob

PROBE_SUFFIX = " (admission probe)"


@dataclass(frozen=True, slots=True, kw_only=True)
class Obstacle:
    """Why a job cannot run as requested: `kind` groups the load-time report, `text` is this job's."""

    kind: str
    text: str


# The report's line per kind, in this order.
KINDS = {
    "type_missing": "request a GPU type this cluster does not have",
    "no_precision": "request a GPU type without their precision (bf16)",
    "too_many_of_type": "request more GPUs of their type than the cluster has",
    "too_many": "request more GPUs than any one GPU type here has",
    "excluded": "have every GPU type excluded after out-of-memory failures",
    "no_fit": "fit no GPU type here in memory (no plan, no configuration of up to twice the request)",
    "other": "are placed nowhere by the policy even on the idle cluster",
}


def obstacle(job: QueuedJob, types: dict[str, GpuType], capacity: dict[str, int]) -> Obstacle | None:
    """What stops a policy that keeps the user's request (GPU count, and type if one is named) from
    ever running the job here; None when nothing does."""
    wanted, n = job.requested_gpu_type, requested_gpus(job)
    precision = job.spec.training.precision
    if wanted is not None:
        if wanted not in types:
            return Obstacle(kind="type_missing", text=f"requests {wanted}, which this cluster does not have")
        if precision.needs_bf16 and not types[wanted].supports_bf16:
            return Obstacle(kind="no_precision", text=f"requests {precision.value} on {wanted}, which has no bf16")
        if n > capacity[wanted]:
            return Obstacle(kind="too_many_of_type",
                            text=f"requests {n}x {wanted}; the cluster has {capacity[wanted]}")
        return None
    allowed = [t for t in types if t not in job.excluded_gpu_types]
    if not allowed:
        return Obstacle(kind="excluded", text="every GPU type here is excluded after out-of-memory failures")
    most = max(capacity[t] for t in allowed)
    if n > most:
        total = sum(capacity.values())
        beyond = f" (the whole cluster has {total})" if n > total else ""
        return Obstacle(kind="too_many", text=f"requests {n} GPUs; the most of one type here is {most}{beyond}")
    return None


def no_fit() -> Obstacle:
    return Obstacle(kind="no_fit", text="no GPU type here fits it in memory, under any policy")


def unplaced(policy: str) -> Obstacle:
    return Obstacle(kind="other", text=f"{policy} places it nowhere even on the idle cluster")


def shape_key(job: QueuedJob) -> tuple:
    """What a policy's verdict on an idle cluster depends on: not the job's id, arrival or steps."""
    s = job.spec
    return (s.model.name, s.training, s.seq_len, s.global_batch, job.requested_gpus, job.requested_gpu_type,
            job.excluded_gpu_types)


def places_on_idle(policy: Policy, nodes: list[NodeState], job: QueuedJob) -> bool:
    """Whether `policy` places `job` on the cluster with every GPU free (a call under a probe id)."""
    probe = replace(job, job_id=job.job_id + PROBE_SUFFIX)
    idle = ClusterState(nodes=tuple(n.with_free(n.total_gpus) for n in nodes))
    decisions = policy.schedule(idle, [probe], job.submit_time_s)
    return any(isinstance(d, Place) and d.job_id == probe.job_id for d in decisions)


def probed_id(job_id: str) -> str:
    """The real job's id for a probe's (a judge such as Simulator.true_fits looks the job up)."""
    return job_id.removesuffix(PROBE_SUFFIX)

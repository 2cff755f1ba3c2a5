"""Values the scheduler reads (cluster state, queue) and writes (decisions)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from frenzy.core.gpu import DEFAULT_INTER_NODE_BANDWIDTH_BYTES_S
from frenzy.core.job import JobSpec
from frenzy.memory.plans import PlanChoice


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeState:
    name: str
    gpu_type: str  # canonical GPU type name
    total_gpus: int
    free_gpus: int
    inter_node_bandwidth_bytes_s: float = DEFAULT_INTER_NODE_BANDWIDTH_BYTES_S  # its link to other nodes

    def __post_init__(self):
        if not 0 <= self.free_gpus <= self.total_gpus:
            raise ValueError(f"node {self.name}: free GPUs {self.free_gpus} not in 0..{self.total_gpus}")
        if not self.inter_node_bandwidth_bytes_s > 0:
            raise ValueError(f"node {self.name}: inter-node bandwidth must be positive")

    def with_free(self, free_gpus: int) -> NodeState:
        """This node with another free count. Built directly rather than with dataclasses.replace,
        which costs several times more on the simulator's hot path; keep it in step with the fields."""
        return NodeState(name=self.name, gpu_type=self.gpu_type, total_gpus=self.total_gpus, free_gpus=free_gpus,
                         inter_node_bandwidth_bytes_s=self.inter_node_bandwidth_bytes_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunningJob:
    job_id: str
    choice: PlanChoice
    allocation: tuple[tuple[str, int], ...]  # (node name, GPUs) pairs
    start_time_s: float
    expected_end_s: float | None = None  # predicted completion (for reservations and backfill)
    job: QueuedJob | None = None  # the job as it was queued (round-based policies may re-plan it)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunningChanges:
    """How `running` came from an earlier state's: the jobs started and stopped since (by object;
    one both started and stopped since is in both). A caller that read `previous` updates what it
    read with these instead of comparing the two tuples job by job."""
    previous: tuple[RunningJob, ...]
    started: tuple[RunningJob, ...]
    stopped: tuple[RunningJob, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterState:
    nodes: tuple[NodeState, ...]
    running: tuple[RunningJob, ...] = ()
    changes: RunningChanges | None = field(default=None, compare=False, repr=False)  # None: not known

    def free_by_type(self) -> dict[str, int]:
        free: dict[str, int] = {}
        for node in self.nodes:
            free[node.gpu_type] = free.get(node.gpu_type, 0) + node.free_gpus
        return free

    def total_by_type(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for node in self.nodes:
            total[node.gpu_type] = total.get(node.gpu_type, 0) + node.total_gpus
        return total

    def widest_node_by_type(self) -> dict[str, int]:
        """GPUs in the largest node of each type: the bound on a tensor-parallel group there."""
        widest: dict[str, int] = {}
        for node in self.nodes:
            widest[node.gpu_type] = max(widest.get(node.gpu_type, 0), node.total_gpus)
        return widest


@dataclass(frozen=True, slots=True, kw_only=True)
class QueuedJob:
    """A job waiting for GPUs, with MARP's ranked plans (its priority order) already attached.

    `requested_gpus` / `requested_gpu_type` are what a user of a non-serverless system would have
    asked for; baseline policies use them, Frenzy's does not.
    """

    job_id: str
    spec: JobSpec
    plans: tuple[PlanChoice, ...]
    submit_time_s: float
    requested_gpus: int | None = None
    requested_gpu_type: str | None = None
    attempts: int = 0
    priority: int = 0
    # GPU types this job must not be placed on again (a user who saw it run out of memory there).
    excluded_gpu_types: tuple[str, ...] = ()
    # What `plans` are ranked by (frenzy.memory.ranking): "time", or "cost" for a user who wants the
    # cheapest run; HAS never spends more GPUs on a cost job to make it faster.
    objective: str = "time"
    metadata: dict = field(default_factory=dict, compare=False, hash=False)

    def with_steps(self, steps: int) -> QueuedJob:
        """This job with `steps` steps (a running job queued again for the steps it has left). Built
        field by field rather than through __init__ (or dataclasses.replace, twice as dear again):
        HAS re-queues slow runners on most calls. Keep it in step with the fields (a test checks)."""
        job, put = object.__new__(QueuedJob), object.__setattr__  # a frozen dataclass's own __setattr__ refuses
        put(job, "job_id", self.job_id)
        put(job, "spec", self.spec.with_steps(steps))
        put(job, "plans", self.plans)
        put(job, "submit_time_s", self.submit_time_s)
        put(job, "requested_gpus", self.requested_gpus)
        put(job, "requested_gpu_type", self.requested_gpu_type)
        put(job, "attempts", self.attempts)
        put(job, "priority", self.priority)
        put(job, "excluded_gpu_types", self.excluded_gpu_types)
        put(job, "objective", self.objective)
        put(job, "metadata", self.metadata)
        return job

    @property
    def buys_time(self) -> bool:
        """Whether GPUs may be spent to finish this job sooner (growth, re-queue, patience, and
        stopping other jobs for it, preemption and shrinking, which a job ranked by cost is kept out
        of both ways: a restart it caused or suffered would be paid from somebody's cost)."""
        return self.objective == "time"


@dataclass(frozen=True, slots=True, kw_only=True)
class Place:
    job_id: str
    choice: PlanChoice
    allocation: tuple[tuple[str, int], ...]  # (node name, GPUs); sums to choice.num_gpus

    def __post_init__(self):
        if sum(n for _, n in self.allocation) != self.choice.num_gpus:
            raise ValueError(f"allocation of job {self.job_id} does not add up to {self.choice.num_gpus} GPUs")


@dataclass(frozen=True, slots=True, kw_only=True)
class Wait:
    job_id: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Preempt:
    job_id: str
    reason: str


Decision = Union[Place, Wait, Preempt]

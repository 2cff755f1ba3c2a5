"""The simulator's per-job bookkeeping and the user's behaviour after an out-of-memory failure."""

from __future__ import annotations

from dataclasses import replace

from frenzy.core.gpu import GpuType
from frenzy.core.job import JobSpec
from frenzy.memory.plans import PlanChoice
from frenzy.sched.types import QueuedJob
from frenzy.sim.trace import TraceJob


class Run:
    """One attempt of a job on an allocation: from placement to completion, preemption or OOM."""

    __slots__ = ("choice", "allocation", "start_s", "compute_start_s", "step_s", "end_s", "oom", "gpu")

    def __init__(self, choice: PlanChoice, allocation, start_s: float, compute_start_s: float, step_s: float,
                 end_s: float, oom: bool, gpu: GpuType):
        self.choice, self.allocation, self.start_s = choice, allocation, start_s
        self.compute_start_s, self.step_s, self.end_s, self.oom, self.gpu = compute_start_s, step_s, end_s, oom, gpu

    @property
    def num_gpus(self) -> int:
        return self.choice.num_gpus


class Attempt:
    """One finished attempt: when it held GPUs, on what, and how it ended (finished, preempted,
    out of memory)."""

    __slots__ = ("start_s", "end_s", "gpu_type", "gpus", "plan", "ended")

    def __init__(self, start_s: float, end_s: float, gpu_type: str, gpus: int, plan, ended: str):
        self.start_s, self.end_s, self.gpu_type, self.gpus, self.plan, self.ended = \
            start_s, end_s, gpu_type, gpus, plan, ended

    def record(self, describe) -> dict:
        """The attempt as a record; `describe(plan)` gives the plan's text (plan.describe(), kept per plan)."""
        return {"start_s": self.start_s, "end_s": self.end_s, "gpu_type": self.gpu_type, "gpus": self.gpus,
                "plan": describe(self.plan), "ended": self.ended}


class SimJob:
    """Mutable state of one job over the simulation (internal to the engine)."""

    __slots__ = ("index", "trace", "spec", "queued", "error", "remaining_steps", "first_start_s", "finish_s",
                 "ooms", "preemptions", "gpu_s_allocated", "gpu_s_useful", "cost_usd", "run", "epoch",
                 "abandoned", "started_before", "held_s", "attempts", "reason", "given_up_s")

    def __init__(self, index: int, trace: TraceJob, spec: JobSpec, queued: QueuedJob, error: float):
        self.index, self.trace, self.spec, self.queued, self.error = index, trace, spec, queued, error
        self.remaining_steps = float(spec.steps)
        self.first_start_s: float | None = None
        self.finish_s: float | None = None
        self.ooms = self.preemptions = 0
        self.gpu_s_allocated = self.gpu_s_useful = self.cost_usd = 0.0
        self.run: Run | None = None
        self.epoch = 0  # bumps on every stop, so stale completion events are ignored
        self.abandoned = False
        self.started_before = False
        self.held_s = 0.0  # wall time holding GPUs, over all attempts
        self.attempts: list[Attempt] = []
        self.reason = None  # frenzy.sim.admission.Obstacle: why it was rejected or given up
        self.given_up_s: float | None = None

    @property
    def submit_s(self) -> float:
        return self.trace.submit_time_s

    def account(self, run: Run, until_s: float, useful_s: float, ended: str) -> None:
        held = max(0.0, until_s - run.start_s)
        self.held_s += held
        gpu_s = run.num_gpus * held
        self.gpu_s_allocated += gpu_s
        self.gpu_s_useful += run.num_gpus * useful_s
        self.cost_usd += gpu_s / 3600 * run.gpu.price_per_gpu_hour_usd
        self.attempts.append(Attempt(run.start_s, until_s, run.gpu.name, run.num_gpus, run.choice.plan, ended))

    def abandon(self, now: float, reason) -> None:
        self.abandoned, self.given_up_s, self.reason = True, now, reason


def after_oom(job: QueuedJob, failed: GpuType, gpus: int, types: dict[str, GpuType],
              capacity: dict[str, int]) -> QueuedJob:
    """The user's resubmission after running out of memory on `gpus` x `failed`.

    If the cluster has a GPU type with more memory, the user avoids every type with no more memory
    than the one that failed (and, if they had asked for a type, asks for the smallest larger one);
    otherwise they ask for twice the GPUs, up to the most the largest type has.
    """
    bigger = sorted((g for g in types.values() if g.memory_bytes > failed.memory_bytes),
                    key=lambda g: (g.memory_bytes, g.name))
    if bigger:
        excluded = set(job.excluded_gpu_types) | {n for n, g in types.items() if g.memory_bytes <= failed.memory_bytes}
        wanted = bigger[0].name if job.requested_gpu_type else None
        return replace(job, excluded_gpu_types=tuple(sorted(excluded)), requested_gpu_type=wanted,
                       attempts=job.attempts + 1)
    limit = capacity[failed.name]
    more = min(2 * max(gpus, job.requested_gpus or 1), 1 << (limit.bit_length() - 1))
    return replace(job, requested_gpus=more, attempts=job.attempts + 1)

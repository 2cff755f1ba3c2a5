"""What a simulation run records, and the metrics computed from it.

Definitions (all times in seconds):
  outcome          every job of the trace has one: finished; given up (its user stopped after repeated
                   out-of-memory failures, or its resubmission could not run); rejected (the policy can
                   never run it here: frenzy.sim.admission); waiting (still queued when no event was
                   left; a policy that neither runs nor rejects a job shows up here, not nowhere)
  JCT              finish - submit, per finished job (average, median, p99: over finished jobs only)
  queueing delay   JCT - time the job held GPUs (waiting before its first start and after every
                   OOM failure or preemption)
  makespan         last finish - first submit
  utilisation      allocated: GPU-seconds held by jobs / (cluster GPUs x makespan);
                   useful: GPU-seconds spent on steps that count (no start-up, restore, OOM attempts
                   or lost progress) / the same
  GPU-hours, cost  allocated GPU-seconds / 3600, and x each type's catalog price per GPU-hour
  decision time    wall time of each `schedule` call (per round), and that over the jobs it decided
                   on (per job): the queue, plus the running jobs for round-based policies
Two policies' JCTs are compared over the jobs both finished (`compare_finished`): a job one policy
abandons after repeated out-of-memory failures has no JCT, and leaving it out of that policy's
average alone would reward giving up on the longest jobs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def _pct(values, q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else 0.0


class SimResult:
    def __init__(self, *, policy: str, cluster: str, total_gpus: int, capacity: dict[str, int] | None = None):
        self.policy, self.cluster, self.total_gpus = policy, cluster, total_gpus
        self.capacity = dict(capacity or {})  # GPUs per type
        self.round_s: list[float] = []
        self.per_job_s: list[float] = []
        self.times: list[float] = []
        self.queue_len: list[int] = []
        self.busy: list[int] = []
        self.busy_by_type: dict[str, list[int]] = {}
        self.jobs: list[dict] = []
        self.rejected: list[str] = []
        self.wall_s = 0.0

    def record_decision(self, elapsed_s: float, jobs_considered: int) -> None:
        self.round_s.append(elapsed_s)
        self.per_job_s.append(elapsed_s / max(1, jobs_considered))

    def sample(self, now: float, queue_len: int, busy_gpus: int, busy_by_type: dict[str, int]) -> None:
        if self.times and self.times[-1] == now:
            self.queue_len[-1], self.busy[-1] = queue_len, busy_gpus
            for t, n in busy_by_type.items():
                self.busy_by_type[t][-1] = n
            return
        self.times.append(now)
        self.queue_len.append(queue_len)
        self.busy.append(busy_gpus)
        for t, n in busy_by_type.items():
            self.busy_by_type.setdefault(t, []).append(n)

    def finish(self, jobs, wall_s: float) -> None:
        """Per-job records of every job of the trace (frenzy.sim.jobs.SimJob), rejected ones included."""
        self.wall_s = wall_s
        described: dict[int, tuple] = {}  # id(plan) -> (plan, its description): jobs of a shape share plans

        def describe(plan) -> str:
            entry = described.get(id(plan))
            if entry is None or entry[0] is not plan:
                entry = described[id(plan)] = (plan, plan.describe())
            return entry[1]
        self.jobs = [_record(j, describe) for j in jobs]
        self.rejected = [r["job_id"] for r in self.jobs if r["outcome"] == "rejected"]

    def jcts(self) -> np.ndarray:
        return np.array([j["jct_s"] for j in self.jobs if j["jct_s"] is not None])

    def summary(self) -> dict:
        finished = [j for j in self.jobs if j["jct_s"] is not None]
        outcomes = {o: sum(j["outcome"] == o for j in self.jobs) for o in OUTCOMES}
        jct = self.jcts()
        held = np.array([j["gpu_s_allocated"] for j in finished])
        start = min((j["submit_s"] for j in self.jobs), default=0.0)
        end = max((j["finish_s"] for j in finished), default=start)
        makespan = max(end - start, 1e-9)
        allocated = sum(j["gpu_s_allocated"] for j in self.jobs)
        useful = sum(j["gpu_s_useful"] for j in self.jobs)
        waits = np.array([j["jct_s"] - self._held_wall(j) for j in finished])
        return {
            "policy": self.policy, "cluster": self.cluster, "total_gpus": self.total_gpus,
            "jobs": len(self.jobs), "finished": len(finished), "given_up": outcomes["given up"],
            "rejected": outcomes["rejected"], "waiting": outcomes["waiting"],
            "never_run": sum(j["start_s"] is None for j in self.jobs),
            "abandoned": outcomes["given up"], "unfinished": outcomes["waiting"],  # older names
            "averages_over": "finished jobs", "avg_jct_s": float(jct.mean()) if len(jct) else 0.0, "median_jct_s": _pct(jct, 50),
            "p99_jct_s": _pct(jct, 99), "avg_queueing_delay_s": float(waits.mean()) if len(waits) else 0.0,
            "median_queueing_delay_s": _pct(waits, 50), "makespan_s": makespan,
            "utilisation_allocated": allocated / (self.total_gpus * makespan),
            "utilisation_useful": useful / (self.total_gpus * makespan),
            "oom_restarts": sum(j["ooms"] for j in self.jobs),
            "preemptions": sum(j["preemptions"] for j in self.jobs),
            "gpu_hours": allocated / 3600, "cost_usd": sum(j["cost_usd"] for j in self.jobs),
            "avg_gpus_per_job": float(held.sum() / max(1e-9, sum(self._held_wall(j) for j in finished))),
            "decisions": len(self.round_s),
            "decision_per_job_ms": {k: _pct(self.per_job_s, q) * 1e3 for k, q in (("p50", 50), ("p95", 95), ("max", 100))},
            "decision_per_round_ms": {k: _pct(self.round_s, q) * 1e3 for k, q in (("p50", 50), ("p95", 95), ("max", 100))},
            "sim_wall_s": self.wall_s,
        }

    @staticmethod
    def _held_wall(job: dict) -> float:
        return job.get("held_s", 0.0)

    def timeseries(self) -> dict:
        return {"t_s": self.times, "queue_len": self.queue_len, "busy_gpus": self.busy,
                "busy_gpus_by_type": self.busy_by_type}

    def last_completion_s(self) -> float:
        """When the last job finished or was given up (the run's end; 0 if none did)."""
        return max((j["end_s"] for j in self.jobs if j["end_s"] is not None), default=0.0)


OUTCOMES = ("finished", "given up", "rejected", "waiting")


def _record(j, describe) -> dict:
    """One job's record: submit, first start and end (finish or give-up) times, the GPU type, count and
    plan of its last attempt (`describe(plan)`: its text), every attempt, and why it was rejected or
    given up."""
    rejected = j.reason is not None and not j.abandoned and not j.attempts
    outcome = "finished" if j.finish_s is not None else "given up" if j.abandoned else \
        "rejected" if rejected else "waiting"
    last = j.attempts[-1] if j.attempts else None
    reason = j.reason.text if j.reason is not None else \
        "still queued when the simulation ended: the policy never placed it" if outcome == "waiting" else None
    return {
        "job_id": j.queued.job_id, "outcome": outcome, "reason": reason, "submit_s": j.submit_s,
        "start_s": j.first_start_s, "end_s": j.finish_s if j.finish_s is not None else j.given_up_s,
        "jct_s": None if j.finish_s is None else j.finish_s - j.submit_s,
        "gpu_type": last and last.gpu_type, "gpus": last and last.gpus, "plan": last and describe(last.plan),
        "attempts": [a.record(describe) for a in j.attempts], "ooms": j.ooms, "preemptions": j.preemptions,
        "gpu_s_allocated": j.gpu_s_allocated, "gpu_s_useful": j.gpu_s_useful, "cost_usd": j.cost_usd,
        "held_s": j.held_s, "requested_gpus": j.trace.requested_gpus,
        "requested_gpu_type": j.trace.requested_gpu_type,
        # older names, read by the benchmarks
        "first_start_s": j.first_start_s, "finish_s": j.finish_s, "abandoned": j.abandoned,
    }


@dataclass(frozen=True)
class FinishedComparison:
    """One policy's JCTs against another's over the jobs both finished."""
    jobs: int  # finished by both
    avg_cut: float  # 1 - ours / theirs, average JCT: > 0 where ours is lower
    p99_ratio: float  # ours / theirs, p99 JCT: <= 1 where ours is no worse


def compare_finished(ours: list[dict], theirs: list[dict]) -> FinishedComparison:
    """Compare two runs of the same jobs (SimResult.jobs) over the jobs both finished."""
    mine = {j["job_id"]: j["jct_s"] for j in ours if j["jct_s"] is not None}
    other = {j["job_id"]: j["jct_s"] for j in theirs if j["jct_s"] is not None}
    both = [i for i in mine if i in other]
    if not both:
        raise ValueError("the two runs finished no job in common: nothing to compare")
    a, b = np.array([mine[i] for i in both]), np.array([other[i] for i in both])
    return FinishedComparison(jobs=len(both), avg_cut=float(1 - a.sum() / b.sum()),
                              p99_ratio=float(np.percentile(a, 99) / np.percentile(b, 99)))

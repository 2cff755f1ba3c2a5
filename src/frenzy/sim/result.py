"""What a simulation run records, and the metrics computed from it.

Definitions (all times in seconds):
  JCT              finish - submit, per finished job (average, median, p99)
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
    def __init__(self, *, policy: str, cluster: str, total_gpus: int):
        self.policy, self.cluster, self.total_gpus = policy, cluster, total_gpus
        self.round_s: list[float] = []
        self.per_job_s: list[float] = []
        self.times: list[float] = []
        self.queue_len: list[int] = []
        self.busy: list[int] = []
        self.jobs: list[dict] = []
        self.rejected: list[str] = []
        self.wall_s = 0.0

    def record_decision(self, elapsed_s: float, jobs_considered: int) -> None:
        self.round_s.append(elapsed_s)
        self.per_job_s.append(elapsed_s / max(1, jobs_considered))

    def sample(self, now: float, queue_len: int, busy_gpus: int) -> None:
        if self.times and self.times[-1] == now:
            self.queue_len[-1], self.busy[-1] = queue_len, busy_gpus
            return
        self.times.append(now)
        self.queue_len.append(queue_len)
        self.busy.append(busy_gpus)

    def finish(self, jobs, rejected: list[str], wall_s: float) -> None:
        self.rejected, self.wall_s = list(rejected), wall_s
        for j in jobs:
            self.jobs.append({
                "job_id": j.queued.job_id, "submit_s": j.submit_s, "first_start_s": j.first_start_s,
                "finish_s": j.finish_s, "jct_s": None if j.finish_s is None else j.finish_s - j.submit_s,
                "ooms": j.ooms, "preemptions": j.preemptions, "gpu_s_allocated": j.gpu_s_allocated,
                "gpu_s_useful": j.gpu_s_useful, "cost_usd": j.cost_usd, "abandoned": j.abandoned,
                "held_s": j.held_s, "plan": j.last_plan,
            })

    def jcts(self) -> np.ndarray:
        return np.array([j["jct_s"] for j in self.jobs if j["jct_s"] is not None])

    def summary(self) -> dict:
        finished = [j for j in self.jobs if j["jct_s"] is not None]
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
            "jobs": len(self.jobs), "finished": len(finished), "rejected": len(self.rejected),
            "abandoned": sum(j["abandoned"] for j in self.jobs),
            "unfinished": sum(1 for j in self.jobs if j["jct_s"] is None and not j["abandoned"]),
            "avg_jct_s": float(jct.mean()) if len(jct) else 0.0, "median_jct_s": _pct(jct, 50),
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
        return {"t_s": self.times, "queue_len": self.queue_len, "busy_gpus": self.busy}


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

"""`gavel`: Gavel-style heterogeneity-aware max-min fairness (Narayanan et al., OSDI'20).

A linear program over a throughput matrix (job x GPU type, the user's plan at the requested GPU
count, frenzy.perf) finds time fractions X[j, t] that maximise the minimum over jobs of the job's
throughput relative to running alone on its best type. Every round (360 s, as in the Gavel paper)
the round-based mechanism gives GPUs to the (job, type) pairs with the highest X[j, t] / (rounds
received on t + 1), so that received time tracks X; a job kept on the same type keeps its GPUs (a
lease renewal), one moved or paused is preempted. Gavel does not reason about memory: its matrix
holds every type, so jobs land on GPUs they do not fit, run out of memory and are resubmitted
avoiding that type (the simulator's OOM rule).
The rounds-received counters are the one piece of state the mechanism needs across calls.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from frenzy.sched.configs import config_choice
from frenzy.sched.pool import FreePool
from frenzy.sched.registry import register
from frenzy.sched.requests import requested_gpus, type_order
from frenzy.sched.types import ClusterState, Decision, Place, Preempt, QueuedJob

ROUND_S = 360.0


def max_min_fractions(throughput: np.ndarray, gpus: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """X maximising min_j sum_t X[j,t] thr[j,t] / max_t thr[j,t], s.t. sum_t X[j,t] <= 1 and
    sum_j gpus[j] X[j,t] <= capacity[t]; X[j,t] = 0 where thr[j,t] = 0. (Gavel, section 4.1.)"""
    from scipy.optimize import linprog  # imported only when a round is solved: keeps `import frenzy` light

    jobs, types = throughput.shape
    best = throughput.max(axis=1, keepdims=True)
    norm = np.divide(throughput, best, out=np.zeros_like(throughput), where=best > 0)
    n = jobs * types + 1  # the last variable is the minimum z
    cost = np.zeros(n)
    cost[-1] = -1.0
    rows, rhs = [], []
    for j in range(jobs):
        if best[j, 0] <= 0:
            continue
        row = np.zeros(n)
        row[j * types:(j + 1) * types] = -norm[j]
        row[-1] = 1.0  # z - sum_t X norm <= 0
        rows.append(row)
        rhs.append(0.0)
        row = np.zeros(n)
        row[j * types:(j + 1) * types] = 1.0
        rows.append(row)
        rhs.append(1.0)
    for t in range(types):
        row = np.zeros(n)
        row[t:jobs * types:types] = gpus
        rows.append(row)
        rhs.append(capacity[t])
    bounds = [(0.0, 1.0 if throughput[j, t] > 0 else 0.0) for j in range(jobs) for t in range(types)] + [(0, None)]
    result = linprog(cost, A_ub=np.array(rows), b_ub=np.array(rhs), bounds=bounds, method="highs")
    if result.x is None:
        return np.zeros_like(throughput)
    return result.x[:-1].reshape(jobs, types)


@register("gavel")
class GavelScheduler:
    name = "gavel"
    round_s = ROUND_S
    rotates = True  # time-sharing: rounds matter even when nothing arrives or finishes

    def __init__(self):
        self._received: dict[str, dict[str, int]] = {}
        self._cache: tuple | None = None

    def _fractions(self, jobs, types, pool: FreePool) -> np.ndarray:
        key = (tuple((j.job_id, j.excluded_gpu_types) for j in jobs), tuple(types))
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        thr = np.zeros((len(jobs), len(types)))
        gpus = np.array([float(requested_gpus(j)) for j in jobs])
        for a, job in enumerate(jobs):
            for b, gpu_type in enumerate(types):
                n = requested_gpus(job)
                if gpu_type in job.excluded_gpu_types or n > pool.capacity[gpu_type]:
                    continue
                config = config_choice(job.spec, gpu_type, n, pool.widest[gpu_type], pool.links[gpu_type])
                if config is not None:
                    thr[a, b] = 1.0 / config.step_time_s
        x = max_min_fractions(thr, gpus, np.array([float(pool.capacity[t]) for t in types]))
        self._cache = (key, x)
        return x

    def schedule(self, state: ClusterState, queue: Sequence[QueuedJob], now: float) -> list[Decision]:
        pool = FreePool(state)
        types = type_order(state)
        running = {r.job.job_id: r for r in state.running if r.job is not None}
        jobs = [r.job for r in running.values()] + list(queue)
        if not jobs:
            return []
        x = self._fractions(jobs, types, pool)
        pairs = []
        for a, job in enumerate(jobs):
            got = self._received.setdefault(job.job_id, {})
            for b, gpu_type in enumerate(types):
                if x[a, b] > 1e-6:
                    pairs.append((-x[a, b] / (got.get(gpu_type, 0) + 1), a, gpu_type))
        pairs.sort()
        # Free everything, then re-grant round by round in priority order (leases renewed in place).
        for r in running.values():
            pool.release(r)
        granted: dict[str, tuple] = {}
        for _, a, gpu_type in pairs:
            job = jobs[a]
            if job.job_id in granted:
                continue
            here = running.get(job.job_id)
            if here is not None and here.choice.gpu.name == gpu_type:
                if all(pool.free[gpu_type][n] >= g for n, g in here.allocation):
                    pool.take(gpu_type, here.allocation)
                    granted[job.job_id] = ("keep", gpu_type)
                    continue
            n = requested_gpus(job)
            config = config_choice(job.spec, gpu_type, n, pool.widest[gpu_type], pool.links[gpu_type])
            allocation = None if config is None else pool.find(gpu_type, n, config.choice.plan.tp)
            if allocation is not None:
                pool.take(gpu_type, allocation)
                granted[job.job_id] = ("place", gpu_type, config.choice, allocation)
        return self._decide(jobs, running, granted)

    def _decide(self, jobs, running, granted) -> list[Decision]:
        decisions: list[Decision] = []
        for job in jobs:
            grant = granted.get(job.job_id)
            if grant is not None:
                got = self._received.setdefault(job.job_id, {})
                got[grant[1]] = got.get(grant[1], 0) + 1
            here = running.get(job.job_id)
            if here is not None and (grant is None or grant[0] == "place"):
                decisions.append(Preempt(job_id=job.job_id, reason="gavel: lease not renewed this round"))
            if grant is not None and grant[0] == "place":
                decisions.append(Place(job_id=job.job_id, choice=grant[2], allocation=grant[3]))
        return decisions

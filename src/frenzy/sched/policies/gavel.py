"""`gavel`: Gavel-style heterogeneity-aware max-min fairness (Narayanan et al., OSDI'20).

A linear program over a throughput matrix (job x GPU type, the user's plan at the requested GPU
count, frenzy.perf) finds time fractions X[j, t] that maximise the minimum over jobs of the job's
throughput relative to running alone on its best type. Every round (360 s, as in the Gavel paper)
the round-based mechanism gives GPUs to the (job, type) pairs with the highest X[j, t] / (rounds
received on t + 1), so that received time tracks X; a job kept on the same type keeps its GPUs (a
lease renewal), one moved or paused is preempted. Gavel does not reason about memory: its matrix
holds every type, so jobs land on GPUs they do not fit, run out of memory and are resubmitted
avoiding that type (the simulator's OOM rule).
The rounds-received counters are the one piece of state the mechanism needs across calls; the LP
(frenzy.sched.maxmin) is kept between rounds and solved again, warm-started, only when the set of
jobs (or a job's GPU count or excluded types) changes.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from frenzy.sched.configs import config_choice
from frenzy.sched.maxmin import MaxMinLp
from frenzy.sched.pool import FreePool
from frenzy.sched.registry import register
from frenzy.sched.requests import requested_gpus, type_order
from frenzy.sched.types import ClusterState, Decision, Place, Preempt, QueuedJob

ROUND_S = 360.0


@register("gavel")
class GavelScheduler:
    name = "gavel"
    round_s = ROUND_S
    rotates = True  # time-sharing: rounds matter even when nothing arrives or finishes

    def __init__(self):
        self._received: dict[str, dict[str, int]] = {}
        self._lp: MaxMinLp | None = None
        self._lp_types: tuple = ()
        self._last: tuple = (None, None)  # (job keys, X) of the last solve

    def _fractions(self, jobs, types, pool: FreePool) -> list[list[float]]:
        """X[job][type] (lists: read element by element every round, which numpy makes slow)."""
        # The LP sees the jobs in arrival order whatever the split between running and queued, so
        # it is solved again only when the set changes; a job's row depends on its shape, GPU count
        # and excluded types, so a change there is a new key.
        order = sorted(range(len(jobs)), key=lambda a: (jobs[a].submit_time_s, jobs[a].job_id))
        keys = [(jobs[a].job_id, requested_gpus(jobs[a]), jobs[a].excluded_gpu_types) for a in order]
        if keys != self._last[0]:
            if self._lp is None or self._lp_types != tuple(types):
                self._lp = MaxMinLp([float(pool.capacity[t]) for t in types])
                self._lp_types = tuple(types)
            known = set(self._lp.keys)
            thr = np.array([np.zeros(len(types)) if key in known else self._throughputs(jobs[a], types, pool)
                            for a, key in zip(order, keys)])  # rows of jobs already in the LP are not read
            x = self._lp.solve(keys, thr.reshape(len(keys), len(types)), np.array([float(k[1]) for k in keys]))
            self._last = (keys, {key[0]: row for key, row in zip(keys, x.tolist())})
        return [self._last[1][job.job_id] for job in jobs]

    @staticmethod
    def _throughputs(job, types, pool: FreePool) -> np.ndarray:
        """Steps per second of the user's plan at the requested count on each type (0: cannot run)."""
        n = requested_gpus(job)
        out = np.zeros(len(types))
        for b, gpu_type in enumerate(types):
            if gpu_type in job.excluded_gpu_types or n > pool.capacity[gpu_type]:
                continue
            config = config_choice(job.spec, gpu_type, n, pool.widest[gpu_type], pool.links[gpu_type])
            if config is not None:
                out[b] = 1.0 / config.step_time_s
        return out

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
            got = self._received.get(job.job_id, {})
            for gpu_type, share in zip(types, x[a]):
                if share > 1e-6:
                    pairs.append((-share / (got.get(gpu_type, 0) + 1), a, gpu_type))
        pairs.sort()
        # Free everything, then re-grant round by round in priority order (leases renewed in place).
        for r in running.values():
            pool.release(r)
        granted: dict[str, tuple] = {}
        for _, a, gpu_type in pairs:
            if not any(pool.totals.values()):
                break  # every GPU is given out: no later pair can be granted
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
            if not pool.fits_total(gpu_type, n):  # most pairs, once the round's GPUs are given out
                continue
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

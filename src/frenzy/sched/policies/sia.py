"""`sia`: a Sia-style round-based scheduler (Jayaram Subramanya et al., SOSP'23).

Every round (60 s) it re-decides every job, running or queued: an integer linear program over
jobs x configurations (GPU type, power-of-two GPU count up to MAX_SCALE x the request) maximises
sum_j sum_c x_jc (U_jc^p + LAMBDA_NO_ALLOC), U_jc the normalised goodput (the configuration's
throughput over the job's slowest feasible one), p = 0.5 and the no-allocation penalty 1.1 as in
the Sia artifact's SiaILP defaults; a running job's configurations other than its current one have
their utility discounted by RESTART_PENALTY (moving costs a checkpoint-restore). Solved with SciPy's
`milp` (HiGHS). It knows each configuration's memory feasibility as Sia's profiling would (MARP's
prediction, no margin) and runs the user's plan there (frenzy.sched.configs); `fits` adds another
judge of a configuration, e.g. the simulator's true peaks (Simulator.true_fits), for a Sia whose
profiling never misses. Goodput = throughput: fixed global batches keep statistical efficiency at 1.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from typing import Callable, Iterator, Sequence

import numpy as np

from frenzy.memory.plans import PlanChoice
from frenzy.sched.configs import config_choice
from frenzy.sched.pool import FreePool
from frenzy.sched.registry import register
from frenzy.sched.requests import requested_gpus, type_order
from frenzy.sched.types import ClusterState, Decision, Place, Preempt, QueuedJob, RunningJob

ROUND_S = 60.0
RESTART_PENALTY = 0.25
P_VALUE = 0.5  # Sia's fairness exponent on normalised goodput (artifact default)
LAMBDA_NO_ALLOC = 1.1  # value of allocating a job at all (artifact default): spreads GPUs over jobs
MAX_SCALE = 2  # a job may get up to this many times the GPUs it asked for
SOLVER_TIME_LIMIT_S = 60.0
MIP_RELATIVE_GAP = 0.005


def job_configs(job: QueuedJob, pool: FreePool, types: list[str],
                fits: Callable[[QueuedJob, PlanChoice], bool] | None = None) -> list[tuple[str, int, object]]:
    """(type, count, ConfigChoice) for every configuration predicted to fit in memory (and that
    `fits`, if given, accepts)."""
    limit = MAX_SCALE * requested_gpus(job)
    out = []
    for gpu_type in types:
        if gpu_type in job.excluded_gpu_types:
            continue
        n = 1
        while n <= min(limit, pool.capacity[gpu_type]):
            config = config_choice(job.spec, gpu_type, n, pool.widest[gpu_type], pool.links[gpu_type])
            if config is not None and config.fits_predicted and (fits is None or fits(job, config.choice)):
                out.append((gpu_type, n, config))
            n *= 2
    return out


def build_problem(entries, types: list[str], capacity: dict[str, int]):
    """Objective, constraint matrix and bounds of the ILP. `entries` holds, per job, a list of
    (type, count, utility); variables are those (job, config) pairs in order."""
    from scipy.optimize import LinearConstraint  # imported only when a round is solved: keeps `import frenzy` light
    from scipy.sparse import coo_matrix
    values, rows, cols, data = [], [], [], []
    type_row = {t: len(entries) + i for i, t in enumerate(types)}
    var = 0
    for j, configs in enumerate(entries):
        for gpu_type, n, utility in configs:
            values.append(utility)
            rows += [j, type_row[gpu_type]]
            cols += [var, var]
            data += [1.0, float(n)]
            var += 1
    shape = (len(entries) + len(types), var)
    matrix = coo_matrix((data, (rows, cols)), shape=shape).tocsr()
    upper = np.array([1.0] * len(entries) + [float(capacity[t]) for t in types])
    return -np.array(values), LinearConstraint(matrix, -np.inf, upper)


@contextlib.contextmanager
def _native_stdout_silenced() -> Iterator[None]:
    """Send the process's stdout (fd 1) to /dev/null for the block. HiGHS prints a debug line
    ("HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();") straight to fd 1
    during some MIP solves, whatever `disp` says (HiGHS issue #2783); it would land in the middle
    of `frenzy simulate`'s table. Writes by other threads during the solve (milliseconds) are lost
    too, which a simulation baseline can afford."""
    if sys.stdout is not None:  # Python's own buffer goes out before fd 1 is redirected
        sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 1)
        yield
    finally:
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).fflush(None)  # C stdio may still buffer the line: flush it to /dev/null
        os.dup2(saved, 1)
        os.close(saved)


def solve(entries, types, capacity, time_limit_s: float = SOLVER_TIME_LIMIT_S) -> list[int | None]:
    """Index of the chosen configuration per job (None: not scheduled this round)."""
    if not any(entries):
        return [None] * len(entries)
    from scipy.optimize import Bounds, milp

    cost, constraint = build_problem(entries, types, capacity)
    # A relative gap (not only a time limit) ends the search deterministically: a seeded run must
    # give the same allocation on a loaded machine as on an idle one.
    with _native_stdout_silenced():
        result = milp(cost, constraints=constraint, integrality=np.ones_like(cost), bounds=Bounds(0, 1),
                      options={"time_limit": time_limit_s, "disp": False, "mip_rel_gap": MIP_RELATIVE_GAP})
    x = result.x if result.x is not None else np.zeros_like(cost)
    chosen, var = [], 0
    for configs in entries:
        pick = None
        for k in range(len(configs)):
            if x[var + k] > 0.5:
                pick = k
        chosen.append(pick)
        var += len(configs)
    return chosen


@register("sia")
class SiaScheduler:
    name = "sia"
    round_s = ROUND_S
    rotates = False  # an unchanged state gives the same allocation: no need to re-solve

    def __init__(self, *, fits: Callable[[QueuedJob, PlanChoice], bool] | None = None):
        if fits is not None and not callable(fits):
            raise TypeError(f"fits must be a function (job, plan) -> bool, e.g. Simulator.true_fits; got {fits!r}")
        self.fits = fits

    def schedule(self, state: ClusterState, queue: Sequence[QueuedJob], now: float) -> list[Decision]:
        pool = FreePool(state)
        types = type_order(state)
        running = [r for r in state.running if r.job is not None]
        jobs = [r.job for r in running] + list(queue)
        current = {r.job.job_id: r for r in running}
        options, entries = [], []
        for job in jobs:
            configs = job_configs(job, pool, types, self.fits)
            slowest = max((c.step_time_s for _, _, c in configs), default=1.0)
            here = current.get(job.job_id)
            scored = []
            for gpu_type, n, config in configs:
                utility = (slowest / config.step_time_s) ** P_VALUE
                if here is not None and (here.choice.gpu.name, here.choice.num_gpus) != (gpu_type, n):
                    utility *= 1 - RESTART_PENALTY
                scored.append((gpu_type, n, utility + LAMBDA_NO_ALLOC))
            options.append(configs)
            entries.append(scored)
        chosen = solve(entries, types, pool.capacity)
        return self._apply(jobs, options, chosen, current, pool)

    def _apply(self, jobs, options, chosen, current: dict[str, RunningJob], pool: FreePool) -> list[Decision]:
        decisions: list[Decision] = []
        moves, starts = [], []
        for job, configs, pick in zip(jobs, options, chosen):
            here = current.get(job.job_id)
            target = configs[pick] if pick is not None else None
            if here is not None and target is None:
                pool.release(here)
                decisions.append(Preempt(job_id=job.job_id, reason="sia: not allocated this round"))
            elif here is not None and (here.choice.gpu.name, here.choice.num_gpus) != target[:2]:
                moves.append((job, target, here))
            elif here is None and target is not None:
                starts.append((job, target))
        for job, (gpu_type, n, config), here in moves:
            pool.release(here)
            allocation = pool.find(gpu_type, n, config.choice.plan.tp)
            if allocation is None:  # fragmentation: stay where it is rather than stop
                pool.take(here.choice.gpu.name, here.allocation)
                continue
            pool.take(gpu_type, allocation)
            decisions.append(Preempt(job_id=job.job_id, reason=f"sia: moving to {n}x {gpu_type}"))
            decisions.append(Place(job_id=job.job_id, choice=config.choice, allocation=allocation))
        for job, (gpu_type, n, config) in sorted(starts, key=lambda s: -s[1][1]):
            allocation = pool.find(gpu_type, n, config.choice.plan.tp)
            if allocation is not None:
                pool.take(gpu_type, allocation)
                decisions.append(Place(job_id=job.job_id, choice=config.choice, allocation=allocation))
        return decisions

"""Which GPU type, and which plan there, each job of a contended queue should get: one assignment.

Minimising the sum of completion times of jobs on unrelated machines is an assignment problem
(Horn 1973; Bruno, Coffman & Sethi 1974): a job placed k-th from the last on a machine is waited
for by the k - 1 jobs after it, so its cost there is k x its processing time. Here each GPU type t is
a pool of m_t GPUs that the jobs put on it go through in order; a job with b jobs behind it on t
and plan c costs its own time plus the b jobs each waiting its GPU-seconds w_c spread over the
pool, b w_c / m_t. Its own time lies between w_c / m_t (jobs narrower than the pool share it
perfectly) and its whole run p_c (the pool runs one job at a time); it is priced at the weight
OWN_TIME_WEIGHT between the two. A min-cost matching of jobs to (type, position) then trades
each job's speed on a type against what it costs the others there: the fast GPUs go to the jobs
that gain most from them (comparative advantage), a job with many behind it takes a lean plan and
the last one its fastest. It is the fluid view of a pool (GPUs freed one job at a time, no
fragmentation); the scheduler places what fits and re-solves on the next event.
Cost per call: O(n x plans x n x types) to price the positions, then the matching
(SciPy's linear_sum_assignment), for the n jobs at the head of the queue.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

GRID_WIDTH = 8  # plans per GPU type a grid holds room for (the simulator's frontier: one per GPU count)

# Where a job's own time lies between its GPU-seconds over the pool (0) and its whole run (1). On
# bench/sim_ablation.py's twelve runs over seeds 0-2 (mean cut vs sia; without the assignment
# 26.8%): 0 -> 26.0%, 0.3 -> 28.0%, 0.4 -> 27.7%, 0.5 -> 28.4%, 0.6 -> 27.9%, 0.7 -> 27.4%,
# 1 -> 27.3%.
OWN_TIME_WEIGHT = 0.5


def position_costs(run_s: np.ndarray, gpus: np.ndarray, capacity: np.ndarray):
    """(cost, plan) arrays of shape (jobs, types, positions): for b = 0 .. jobs - 1 jobs behind, the
    least (b + 1) w / m_t + OWN_TIME_WEIGHT (p - w / m_t) over the job's plans on each type (inf
    where it has none), and the index of the plan that gives it. `run_s` and `gpus` are
    (jobs, types, plans) arrays, run_s inf where a job has fewer plans on a type (gpus >= 1 there
    too); `capacity` is m_t."""
    spread = run_s * gpus / capacity[None, :, None]
    own = (1.0 - OWN_TIME_WEIGHT) * spread + OWN_TIME_WEIGHT * run_s
    behind = np.arange(run_s.shape[0], dtype=float)
    delay = np.where(np.isinf(spread), 0.0, spread)  # a missing plan is priced by `own` (inf) alone
    best = np.full((*run_s.shape[:2], run_s.shape[0]), np.inf)
    plan = np.zeros(best.shape, dtype=int)
    for k in range(run_s.shape[2]):  # a few plans per type: no jobs x types x plans x positions array
        cost = own[:, :, k, None] + delay[:, :, k, None] * behind
        cheaper = cost < best
        best[cheaper], plan[cheaper] = cost[cheaper], k
    return best, plan


def assign(run_s: np.ndarray, gpus: np.ndarray, capacity: np.ndarray) -> list[tuple[int, int, int] | None]:
    """Per job: (type, plan, jobs behind it on that type) of the least summed cost, or None for a
    job with no plan at all. Arrays as for position_costs."""
    from scipy.optimize import linear_sum_assignment  # SciPy only once a contended queue is solved

    n = run_s.shape[0]
    if n == 0:
        return []
    cost, plan = position_costs(run_s, gpus, capacity)
    cost = cost.reshape(n, -1)  # jobs x (type, position)
    never = np.isinf(cost)
    # Any job with a plan can take any position on its types, so a matching of finite costs exists:
    # an infinite entry is priced above every finite matching.
    finite = cost[~never]
    cost[never] = (finite.max() + 1.0) * (n + 1) if finite.size else 1.0
    rows, cols = linear_sum_assignment(cost)
    types, behind = np.divmod(cols, n)
    picks = zip(rows.tolist(), types.tolist(), plan[rows, types, behind].tolist(), behind.tolist(),
                never[rows, cols].tolist())
    out: list[tuple[int, int, int] | None] = [None] * n
    for j, t, index, b, missing in picks:
        if not missing:
            out[j] = (t, index, b)
    return out


def plan_grid(plans: Sequence, seconds: dict, types: Sequence[str]) -> tuple:
    """A job's plans by GPU type (rows in `types` order, widest first): an array of shape
    (2, types, GRID_WIDTH or more) holding seconds per step and GPUs (inf seconds and 1 GPU where a
    type has fewer plans); per type and plan the plans the job may take when assigned that one:
    it, then the narrower ones of its type (for when it does not fit now); and the most plans on
    any type. `seconds`: seconds per step by id(plan)."""
    by_type = [sorted((c for c in plans if c.gpu.name == t), key=lambda c: -c.num_gpus) for t in types]
    width = max(GRID_WIDTH, *(len(ps) for ps in by_type))
    table = np.ones((2, len(types), width))
    table[0] = np.inf
    for t, ps in enumerate(by_type):
        table[0, t, :len(ps)] = [seconds[id(c)] for c in ps]
        table[1, t, :len(ps)] = [c.num_gpus for c in ps]
    takes = [[[c, *(d for d in ps[i + 1:] if d.num_gpus < c.num_gpus)] for i, c in enumerate(ps)] for ps in by_type]
    return table, takes, max(len(ps) for ps in by_type)


def assign_head(grids: Sequence[tuple], steps: Sequence[float], startup_s: float,
                capacity: Sequence[float]) -> list[tuple[list, int] | None]:
    """Per job (its plan_grid and steps to run): the plans it may take, the assigned one first and
    then the narrower ones of its type, and how many jobs are behind it on that type; None for a
    job left out."""
    used = max(g[2] for g in grids)  # the padding no job uses is dropped
    if used <= GRID_WIDTH:  # then every grid is GRID_WIDTH wide
        table = np.array([g[0] for g in grids])[:, :, :, :used]
    else:  # only a shape with more plans on a type than GRID_WIDTH widens it
        width = max(g[0].shape[2] for g in grids)
        table = np.ones((len(grids), 2, grids[0][0].shape[1], width))
        table[:, 0] = np.inf
        for row, grid in zip(table, grids):
            row[:, :, :grid[0].shape[2]] = grid[0]
        table = table[:, :, :, :used]
    run_s = startup_s + np.asarray(steps, dtype=float)[:, None, None] * table[:, 0]
    picks = assign(run_s, table[:, 1], np.asarray(capacity, dtype=float))
    return [None if pick is None else (grid[1][pick[0]][pick[1]], pick[2]) for grid, pick in zip(grids, picks)]

"""Gavel's max-min fairness LP, kept in one HiGHS model from round to round (Narayanan et al., OSDI'20).

For jobs j and GPU types t, with thr[j, t] the job's throughput on t (0: it cannot run there),
norm[j, t] = thr[j, t] / max_t thr[j, t], gpus[j] its GPU count and capacity[t] the type's GPUs:

    phase 1:  maximise z  s.t.  z <= sum_t norm[j,t] X[j,t]        (every job that can run somewhere)
                                sum_t X[j,t] <= 1                   (a job is in one place at a time)
                                sum_j gpus[j] X[j,t] <= capacity[t]
                                0 <= X[j,t] <= (1 if thr[j,t] > 0 else 0)
    phase 2:  maximise sum_j,t norm[j,t] X[j,t] (1 + TIE_BREAK x (n - rank[j,t]))
              over the phase-1 optima (z >= z* (1 - Z_SLACK)); rank orders the (job, type) pairs, jobs
              in the order given, then types; n is the number of pairs

Phase 1 is Gavel's section 4.1 LP. It has many optimal X (only the bottleneck jobs' shares are
fixed), and a simplex solve returns whichever optimal vertex its start leads to, so a warm start
could change the allocation. Phase 2 picks one optimum: the capacity the bottleneck leaves is given
where it adds the most normalised throughput (Pareto efficiency), ties going to the earlier job and
then the earlier type; its objective is generic, so the optimum is unique and a warm solve returns
the same X as a cold one.

Warm start: a job joining adds its columns and rows, a job leaving deletes them, and HiGHS
re-solves from the basis it kept (its own incremental API; scipy's `linprog` builds and solves from
scratch on every call).
"""

from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager
from typing import Hashable, Sequence

import numpy as np

# Steps of the phase-2 tie-break: 10x HiGHS' dual feasibility tolerance (1e-7), so the solver sees
# them, while n pairs move a weight by n x 1e-6 at most (0.1% for 1,000 pairs).
TIE_BREAK = 1e-6
Z_SLACK = 1e-9  # phase 2 keeps z within this relative distance of phase 1's optimum (solver tolerance)
ROUND_DECIMALS = 9  # X is rounded so that solver noise below 1e-9 cannot reorder equal priorities


def _highs():
    try:
        import highspy  # imported only when an LP is built: keeps `import frenzy` light
    except ImportError:
        raise ImportError("Gavel's LP needs the highspy package, a dependency of frenzy: "
                          "`pip install -e .` (or `pip install highspy`) installs it") from None

    with _stdout_to_devnull():
        h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("random_seed", 0)
    return h


_STDOUT_LOCK = threading.Lock()


@contextmanager
def _stdout_to_devnull():
    """File descriptor 1 pointed at the null device meanwhile. highspy's Highs() prints HiGHS' banner
    from C++ before any option can turn output off, and on stdout it would corrupt what a command
    prints there (`frenzy simulate --json`'s document). The lock keeps two constructions from
    interleaving their swaps."""
    with _STDOUT_LOCK:
        if sys.stdout is not None:
            sys.stdout.flush()  # what Python holds for fd 1 goes out before it is pointed away
        try:
            saved = os.dup(1)
        except OSError:  # no fd 1 (a daemon): nothing to protect
            yield
            return
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, 1)
            yield
        finally:
            os.dup2(saved, 1)
            os.close(saved)
            os.close(null)


class MaxMinLp:
    """The LP over the jobs last passed to `solve`; `solve` updates the model by the difference."""

    def __init__(self, capacity: Sequence[float]):
        self.capacity = np.asarray(capacity, dtype=float)
        self.types = len(self.capacity)
        self.keys: list[Hashable] = []  # job keys in model order: job k owns cols 1+kT.., rows T+2k, T+2k+1
        self.norm: list[np.ndarray] = []
        self.h = _highs()
        inf = self.h.getInfinity()
        self.inf = inf
        self.h.addCol(-1.0, 0.0, inf, 0, np.array([], dtype=np.int32), np.array([], dtype=float))  # z
        self.h.addRows(self.types, np.full(self.types, -inf), self.capacity, 0, np.zeros(self.types, np.int32),
                       np.array([], dtype=np.int32), np.array([], dtype=float))
        self.solves = 0

    def solve(self, keys: Sequence[Hashable], throughput: np.ndarray, gpus: np.ndarray) -> np.ndarray:
        """X (jobs x types) for these jobs, whose `keys` identify a job's row of `throughput` and its
        `gpus` (a key must change when they do). Rows of jobs already in the model are not re-read."""
        wanted = {k: i for i, k in enumerate(keys)}
        if len(wanted) != len(keys):
            raise ValueError("job keys must be distinct")
        gone = [k for k, key in enumerate(self.keys) if key not in wanted]
        self._delete(gone)
        known = set(self.keys)
        for i, key in enumerate(keys):
            if key not in known:
                self._add(key, throughput[i], float(gpus[i]))
        position = {key: k for k, key in enumerate(self.keys)}
        x = self._run([position[key] for key in keys])
        return np.stack([x[position[key]] for key in keys]) if keys else np.zeros((0, self.types))

    def _delete(self, jobs: list[int]) -> None:
        if not jobs:
            return
        t = self.types
        cols = np.array([1 + k * t + b for k in jobs for b in range(t)], dtype=np.int32)
        rows = np.array([t + 2 * k + r for k in jobs for r in (0, 1)], dtype=np.int32)
        self.h.deleteCols(len(cols), cols)
        self.h.deleteRows(len(rows), rows)
        drop = set(jobs)
        self.keys = [key for k, key in enumerate(self.keys) if k not in drop]
        self.norm = [n for k, n in enumerate(self.norm) if k not in drop]

    def _add(self, key: Hashable, thr: np.ndarray, gpus: float) -> None:
        t, inf = self.types, self.inf
        best = float(thr.max()) if len(thr) else 0.0
        norm = thr / best if best > 0 else np.zeros(t)
        first_row = self.h.getNumRow()
        # z - sum_t norm X <= 0 binds only for a job that can run somewhere; then sum_t X <= 1.
        self.h.addRows(2, np.array([-inf, -inf]), np.array([0.0 if best > 0 else inf, 1.0]), 1,
                       np.array([0, 1], dtype=np.int32), np.array([0], dtype=np.int32), np.array([1.0]))
        index, value, starts = [], [], []
        for b in range(t):
            starts.append(len(index))
            index += [b, first_row, first_row + 1]
            value += [gpus, -norm[b], 1.0]
        upper = (thr > 0).astype(float)
        self.h.addCols(t, np.zeros(t), np.zeros(t), upper, len(index), np.array(starts, dtype=np.int32),
                       np.array(index, dtype=np.int32), np.array(value, dtype=float))
        self.keys.append(key)
        self.norm.append(norm)

    def _run(self, order: list[int]) -> np.ndarray:
        """X per job in model order; `order`: the model positions of the jobs in the order given."""
        n = len(self.keys) * self.types
        if n == 0:
            return np.zeros((0, self.types))
        cols = np.arange(1, n + 1, dtype=np.int32)
        self.h.changeColCost(0, -1.0)
        self.h.changeColsCost(n, cols, np.zeros(n))
        self.h.changeColBounds(0, 0.0, self.inf)
        self.h.run()
        z = float(self.h.getSolution().col_value[0])
        self.h.changeColCost(0, 0.0)
        self.h.changeColsCost(n, cols, -self._phase2_weights(order))
        self.h.changeColBounds(0, max(0.0, z * (1 - Z_SLACK) - Z_SLACK), self.inf)
        self.h.run()
        self.solves += 1
        x = np.asarray(self.h.getSolution().col_value[1:n + 1]).reshape(len(self.keys), self.types)
        return np.round(np.clip(x, 0.0, 1.0), ROUND_DECIMALS)

    def _phase2_weights(self, order: list[int]) -> np.ndarray:
        t = self.types
        rank = np.empty((len(self.keys), t))
        rank[order] = np.arange(len(order) * t, dtype=float).reshape(len(order), t)
        return (np.stack(self.norm) * (1.0 + TIE_BREAK * (rank.size - rank))).ravel()


def max_min_fractions(throughput: np.ndarray, gpus: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """One cold solve: X for the jobs in `throughput`'s rows (see the module docstring)."""
    lp = MaxMinLp(capacity)
    return lp.solve(list(range(len(throughput))), throughput, gpus)

"""Gavel's max-min LP kept between rounds: the same optimum as an independent solver, the same X as a
cold solve whatever the model went through, and no solve while the job set stays the same."""

from dataclasses import replace

import numpy as np
import pytest
from scipy.optimize import linprog

from frenzy.sched.maxmin import MaxMinLp, max_min_fractions

CAPACITY = np.array([24.0, 24.0, 16.0])


def _normalised(thr):
    best = thr.max(axis=1, keepdims=True)
    return np.divide(thr, best, out=np.zeros_like(thr), where=best > 0)


def _max_min_by_linprog(thr, gpus) -> float:
    """Gavel's section-4.1 LP written out densely and solved by scipy (phase 1 only): the optimum z."""
    jobs, types = thr.shape
    norm, n = _normalised(thr), thr.size + 1
    a, b = [], []
    for j in range(jobs):
        if thr[j].max() > 0:
            a.append(np.r_[np.zeros(j * types), -norm[j], np.zeros((jobs - j - 1) * types), 1.0])
            b.append(0.0)
        a.append(np.r_[np.zeros(j * types), np.ones(types), np.zeros((jobs - j - 1) * types), 0.0])
        b.append(1.0)
    for t in range(types):
        row = np.zeros(n)
        row[t:thr.size:types] = gpus
        a.append(row)
        b.append(CAPACITY[t])
    bounds = [(0, 1 if v > 0 else 0) for v in thr.ravel()] + [(0, None)]
    cost = np.r_[np.zeros(thr.size), -1.0]
    return -linprog(cost, A_ub=np.array(a), b_ub=np.array(b), bounds=bounds, method="highs").fun


def test_warm_started_solves_match_cold_solves_and_the_independent_optimum():
    rng = np.random.default_rng(3)
    pool = {}

    def job(i):
        if i not in pool:  # some jobs cannot run on some types (0), one in ten on none
            thr = rng.uniform(0.2, 3.0, 3) * (rng.random(3) > 0.25) * (rng.random() > 0.1)
            pool[i] = (thr, float(2 ** rng.integers(0, 4)))
        return pool[i]

    lp, active, next_id = MaxMinLp(CAPACITY), list(range(25)), 25
    for _ in range(60):
        if rng.random() < 0.5 and len(active) > 5:  # a job leaves or one arrives
            active.pop(int(rng.integers(len(active))))
        else:
            active.append(next_id)
            next_id += 1
        thr = np.array([job(i)[0] for i in active])
        gpus = np.array([job(i)[1] for i in active])
        warm = lp.solve(active, thr, gpus)
        cold = max_min_fractions(thr, gpus, CAPACITY)
        np.testing.assert_allclose(warm, cold, atol=1e-7)
        runnable = thr.max(axis=1) > 0
        z = (_normalised(thr) * warm).sum(axis=1)[runnable].min() if runnable.any() else 0.0
        assert z == pytest.approx(_max_min_by_linprog(thr, gpus), abs=1e-6)
        assert np.all(warm.sum(axis=1) <= 1 + 1e-7) and np.all(warm[thr == 0] == 0)
        assert np.all((gpus[:, None] * warm).sum(axis=0) <= CAPACITY + 1e-6)


def test_gavel_solves_only_when_its_job_set_changes():
    from frenzy.sched import get_policy
    from frenzy.sched.types import ClusterState
    from frenzy.sim.cluster import load_cluster
    from frenzy.sim.engine import SimConfig, Simulator
    from tests.sim.conftest import small_jobs

    gavel = get_policy("gavel")
    jobs = [replace(j, submit_time_s=j.submit_time_s / 100, steps=j.steps * 40) for j in small_jobs(16)]
    sim = Simulator(load_cluster("testbed"), gavel, jobs, SimConfig(seed=0))
    sim.rejections()  # the admission probes solve too: count the run's solves only
    before = gavel._lp.solves
    result = sim.run()
    solves, rounds = gavel._lp.solves - before, result.summary()["decisions"]
    # The set changes only at an arrival, or when an attempt ends (completion, or an OOM that changes
    # the job's excluded types); a preemption by the rotation itself leaves it as it was.
    changes = len(result.jobs) + sum(j["ooms"] + 1 for j in result.jobs)
    assert solves <= changes < rounds + changes

    # Directly: the same jobs in another order (running/queued split, queue order) are not solved again.
    state = ClusterState(nodes=tuple(load_cluster("testbed").node_states()))
    queue = [j.queued for j in sim.jobs]
    before = gavel._lp.solves
    gavel.schedule(state, queue, 0.0)
    gavel.schedule(state, queue[::-1], 0.0)
    assert gavel._lp.solves == before + 1
    gavel.schedule(state, queue[1:], 0.0)
    assert gavel._lp.solves == before + 2

"""The joint assignment against brute force over every split of the jobs between GPU types, every
order within each type and every plan choice, priced as the pool model states."""

import itertools

import numpy as np
import pytest

from frenzy.sched.assignment import OWN_TIME_WEIGHT, assign

TYPES = ("fast", "slow")
CAPACITY = {"fast": 4, "slow": 8}


def _arrays(options):
    """(run_s, gpus, capacity) arrays from per-job lists of (type, run_s, GPUs)."""
    width = max(sum(1 for t, _, _ in opts if t == tt) for opts in options for tt in TYPES)
    run_s, gpus = np.full((len(options), len(TYPES), width), np.inf), np.ones((len(options), len(TYPES), width))
    for j, opts in enumerate(options):
        for t, name in enumerate(TYPES):
            mine = [(r, g) for tt, r, g in opts if tt == name]
            for k, (r, g) in enumerate(mine):
                run_s[j, t, k], gpus[j, t, k] = r, g
    return run_s, gpus, np.array([CAPACITY[t] for t in TYPES], dtype=float)


def _pool_cost(jobs_in_order, capacity):
    """Sum of completion times of jobs run in this order (first to last) through a pool of
    `capacity` GPUs, each (run_s, GPUs): a job waits for the GPU-seconds of those before it, then
    takes its own time, OWN_TIME_WEIGHT of the way from its GPU-seconds over the pool to its run."""
    total, before = 0.0, 0.0
    for run_s, n in jobs_in_order:
        total += before / capacity + run_s * n / capacity + OWN_TIME_WEIGHT * (run_s - run_s * n / capacity)
        before += run_s * n
    return total


def _brute_force(options):
    best = float("inf")
    n = len(options)
    for types in itertools.product(TYPES, repeat=n):
        total = 0.0
        for t in TYPES:
            per_job = [[(r, g) for tt, r, g in options[j] if tt == t] for j in range(n) if types[j] == t]
            if any(not plans for plans in per_job):
                total = float("inf")
                break
            total += min((_pool_cost(picks, CAPACITY[t]) for order in itertools.permutations(per_job)
                          for picks in itertools.product(*order)), default=0.0)
        best = min(best, total)
    return best


def _cost_of(options, chosen):
    pools = {t: [] for t in TYPES}
    for opts, (t, index, behind) in zip(options, chosen):
        mine = [(r, g) for tt, r, g in opts if tt == TYPES[t]]
        pools[TYPES[t]].append((behind, mine[index]))
    return sum(_pool_cost([plan for _, plan in sorted(members, reverse=True)], CAPACITY[t])
               for t, members in pools.items())


@pytest.mark.parametrize("seed", range(6))
def test_assignment_finds_the_least_summed_completion_time(seed):
    rng = np.random.default_rng(seed)
    options = []
    for j in range(5):
        opts = []
        for t in TYPES:
            if j == 0 and t == "fast":
                continue  # one job runs on one type only
            for n in (1, 4):  # a lean plan and a wide one, imperfect scaling
                opts.append((t, float(rng.uniform(100, 1000)) * (3.0 if t == "slow" else 1.0) / n ** 0.8, n))
        options.append(opts)
    chosen = assign(*_arrays(options))
    assert all(c is not None for c in chosen)
    assert TYPES[chosen[0][0]] == "slow"
    for t in range(len(TYPES)):  # positions on each type are 0 .. k-1 jobs behind, each used once
        behind = sorted(b for tt, _, b in chosen if tt == t)
        assert behind == list(range(len(behind)))
    assert _cost_of(options, chosen) == pytest.approx(_brute_force(options), rel=1e-9)


def test_a_job_without_plans_is_left_out_and_the_rest_still_assigned():
    options = [[("slow", 50.0, 1)], [("fast", 100.0, 1)], [("slow", 300.0, 2), ("fast", 120.0, 1)]]
    run_s, gpus, capacity = _arrays(options)
    run_s[0] = np.inf
    chosen = assign(run_s, gpus, capacity)
    assert chosen[0] is None and chosen[1] is not None and chosen[2] is not None
    assert assign(run_s[:0], gpus[:0], capacity) == []


def test_jobs_with_many_behind_take_the_lean_plan_and_the_last_ones_the_fast_one():
    # Twelve like jobs on 8 GPUs: wide (8 GPUs, 100 s, 800 GPU-s) or lean (2 GPUs, 350 s, 700 GPU-s).
    # With b jobs behind, at own-time weight 1/2: wide 100 + 100 b, lean 87.5 + 131.25 + 87.5 b;
    # lean is cheaper once b > 9.5, so the two jobs with 10 and 11 behind run lean, the rest wide.
    assert OWN_TIME_WEIGHT == 0.5
    run_s = np.array([[[100.0, 350.0]]] * 12)
    gpus = np.array([[[8.0, 2.0]]] * 12)
    chosen = assign(run_s, gpus, np.array([8.0]))
    plans = {behind: ("wide", "lean")[index] for _, index, behind in chosen}
    assert sorted(plans) == list(range(12))
    assert [b for b, plan in sorted(plans.items()) if plan == "lean"] == [10, 11]


class _Plan:
    """What plan_grid reads of a plan: its GPU type's name and its GPU count."""

    def __init__(self, gpu: str, num_gpus: int):
        self.gpu = type("Gpu", (), {"name": gpu})()
        self.num_gpus = num_gpus


def test_assign_head_pads_a_grid_wider_than_grid_width_and_offers_the_narrower_plans():
    from frenzy.sched.assignment import GRID_WIDTH, assign_head, plan_grid

    # Job 0 has GRID_WIDTH + 1 plans on "fast" (1..9 GPUs, near-linear speed-up) and one on "slow";
    # job 1 one plan per type. Its grid is wider than the others', the case the padding handles.
    plans0 = [_Plan("fast", n) for n in range(1, GRID_WIDTH + 2)] + [_Plan("slow", 2)]
    seconds0 = {id(c): 900.0 / c.num_gpus ** 0.9 for c in plans0[:-1]} | {id(plans0[-1]): 1500.0}
    plans1 = [_Plan("fast", 2), _Plan("slow", 4)]
    seconds1 = {id(plans1[0]): 400.0, id(plans1[1]): 700.0}
    grids = [plan_grid(plans0, seconds0, TYPES), plan_grid(plans1, seconds1, TYPES)]
    assert grids[0][0].shape[2] == GRID_WIDTH + 1 and grids[1][0].shape[2] == GRID_WIDTH

    capacity = [CAPACITY[t] for t in TYPES]
    picks = assign_head(grids, [10.0, 10.0], 60.0, capacity)

    # The same jobs priced by hand, as (type, run_s, GPUs) options, widest plan first per type.
    options = [[(c.gpu.name, 60.0 + 10.0 * s[id(c)], c.num_gpus)
                for c in sorted(p, key=lambda c: -c.num_gpus)] for p, s in ((plans0, seconds0), (plans1, seconds1))]
    expected = assign(*_arrays(options))
    for (taken, behind), (t, index, want_behind), plans in zip(picks, expected, (plans0, plans1)):
        widest_first = sorted((c for c in plans if c.gpu.name == TYPES[t]), key=lambda c: -c.num_gpus)
        assert taken[0] is widest_first[index] and behind == want_behind
        # then the narrower plans of the same type, widest first
        assert all(c.gpu.name == TYPES[t] and c.num_gpus < taken[0].num_gpus for c in taken[1:])
        assert [c.num_gpus for c in taken[1:]] == sorted((c.num_gpus for c in taken[1:]), reverse=True)

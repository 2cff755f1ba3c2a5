"""Run one trace on one cluster under several policies: what `frenzy simulate` and the benches call."""

from __future__ import annotations

from typing import Callable

from frenzy.sched.registry import Policy, get_policy
from frenzy.sim.cluster import ClusterSpec
from frenzy.sim.engine import SimConfig, Simulator
from frenzy.sim.result import SimResult, compare_finished
from frenzy.sim.trace import TraceJob


def simulate(cluster: ClusterSpec, jobs: list[TraceJob], policies: list[str], config: SimConfig = SimConfig(),
             on_progress: Callable[[str, int, int, float], None] | None = None,
             wrap: Callable[[Policy], Policy] | None = None) -> list[SimResult]:
    """One SimResult per policy, in the order given; every policy sees the same jobs and seed.
    `wrap`: applied to each policy (e.g. team quotas, frenzy.sim.teams.quota_policy)."""
    results = []
    for name in policies:
        policy = get_policy(name) if wrap is None else wrap(get_policy(name))
        hook = None if on_progress is None else (lambda done, total, now, n=name: on_progress(n, done, total, now))
        results.append(Simulator(cluster, policy, jobs, config, on_progress=hook).run())
    return results


def comparison_rows(results: list[SimResult], baseline: str = "frenzy") -> list[dict]:
    """Each policy's headline metrics, with frenzy's average JCT relative to it over the jobs both
    finished (frenzy.sim.result.compare_finished)."""
    ours = next((r for r in results if r.policy == baseline), None)
    rows = []
    for r in results:
        row = r.summary()
        if ours is not None and r is not ours:
            try:
                versus = compare_finished(ours.jobs, r.jobs)
                row.update(frenzy_avg_jct_reduction=versus.avg_cut, frenzy_p99_jct_ratio=versus.p99_ratio,
                           jobs_both_finished=versus.jobs)
            except ValueError:
                pass  # no job finished by both: nothing to compare
        rows.append(row)
    return rows

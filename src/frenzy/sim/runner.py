"""Run one trace on one cluster under several policies: what `frenzy simulate` and the benches call."""

from __future__ import annotations

from typing import Callable

from frenzy.sched.registry import get_policy
from frenzy.sim.cluster import ClusterSpec
from frenzy.sim.engine import SimConfig, Simulator
from frenzy.sim.result import SimResult
from frenzy.sim.trace import TraceJob


def simulate(cluster: ClusterSpec, jobs: list[TraceJob], policies: list[str], config: SimConfig = SimConfig(),
             on_progress: Callable[[str, int, int, float], None] | None = None) -> list[SimResult]:
    """One SimResult per policy, in the order given; every policy sees the same jobs and seed."""
    results = []
    for name in policies:
        policy = get_policy(name)
        hook = None if on_progress is None else (lambda done, total, now, n=name: on_progress(n, done, total, now))
        results.append(Simulator(cluster, policy, jobs, config, on_progress=hook).run())
    return results


def comparison_rows(results: list[SimResult], baseline: str = "frenzy") -> list[dict]:
    """Each policy's headline metrics, with frenzy's average JCT relative to it."""
    summaries = [r.summary() for r in results]
    ours = next((s for s in summaries if s["policy"] == baseline), None)
    rows = []
    for s in summaries:
        row = dict(s)
        if ours is not None and s["avg_jct_s"] > 0:
            row["frenzy_avg_jct_reduction"] = 1 - ours["avg_jct_s"] / s["avg_jct_s"]
        rows.append(row)
    return rows

"""Run one trace on one cluster under several policies: what `frenzy simulate` and the benches call."""

from __future__ import annotations

from typing import Callable

from frenzy.sched.registry import Policy, get_policy
from frenzy.sim.admission import KINDS
from frenzy.sim.cluster import ClusterSpec
from frenzy.sim.engine import SimConfig, Simulator
from frenzy.sim.result import SimResult, compare_finished
from frenzy.sim.trace import TraceJob


def prepare(cluster: ClusterSpec, jobs: list[TraceJob], policies: list[str], config: SimConfig = SimConfig(),
            wrap: Callable[[Policy], Policy] | None = None) -> list[Simulator]:
    """One simulator per policy, jobs admitted and the ones it can never run found (not yet run).
    `wrap`: applied to each policy (e.g. team quotas, frenzy.sim.teams.quota_policy)."""
    sims = [Simulator(cluster, get_policy(name) if wrap is None else wrap(get_policy(name)), jobs, config)
            for name in policies]
    for sim in sims:
        sim.rejections()
    return sims


def run_all(sims: list[Simulator],
            on_progress: Callable[[str, int, int, float], None] | None = None) -> list[SimResult]:
    results = []
    for sim in sims:
        name = sim.policy.name
        sim.on_progress = None if on_progress is None else \
            (lambda done, total, now, n=name: on_progress(n, done, total, now))
        results.append(sim.run())
    return results


def simulate(cluster: ClusterSpec, jobs: list[TraceJob], policies: list[str], config: SimConfig = SimConfig(),
             on_progress: Callable[[str, int, int, float], None] | None = None,
             wrap: Callable[[Policy], Policy] | None = None) -> list[SimResult]:
    """One SimResult per policy, in the order given; every policy sees the same jobs and seed."""
    return run_all(prepare(cluster, jobs, policies, config, wrap), on_progress)


def unrunnable_report(sims: list[Simulator]) -> list[dict]:
    """The jobs some policy can never run, grouped by why (frenzy.sim.admission.KINDS, in order):
    {kind, why, jobs, example, rejected_by: {policy: jobs it rejects}}; a job's group is the first
    reason any policy gives that is not 'placed nowhere'."""
    reasons: dict[int, object] = {}
    for sim in sims:
        for index, why in sim.rejections().items():
            if index not in reasons or reasons[index].kind == "other":
                reasons[index] = why
    groups = []
    for kind, title in KINDS.items():
        members = {i for i, why in reasons.items() if why.kind == kind}
        if members:
            example = reasons[min(members)]
            groups.append({"kind": kind, "why": title, "jobs": len(members), "example": example.text,
                           "rejected_by": {sim.policy.name: len(members & sim.rejections().keys()) for sim in sims}})
    return groups


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

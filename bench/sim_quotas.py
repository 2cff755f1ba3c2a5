"""Teams with GPU quotas in the simulator: each team's average JCT alone on its quota vs shared with
borrowing (and shared with no quotas at all), and quota violations; writes docs/BENCHMARKS.md#sim-quotas.

A violation (frenzy.sim.teams.QuotaAudit) is a job still waiting after a scheduling call while
borrowers keep it from its team's quota (a plan of it fits the team's unused nominal quota and
needs GPUs of that type other teams hold beyond their own quotas): it waits at least one more round
for GPUs its quota entitles it to.
    python bench/sim_quotas.py [--loads 1,2] [--teams bench/quota_teams.yaml] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import write_section  # noqa: E402
from sim_common import Slice, load_slice, require_shared  # noqa: E402

SLICE = Slice("Philly, jobs 40000-40399", "traces/philly/philly.csv", 40000, 400)
CLUSTER = "sia-64"


def _avg_h(result, ids: set[str]) -> tuple[float | None, int]:
    jcts = [j["jct_s"] for j in result.jobs if j["job_id"] in ids and j["jct_s"] is not None]
    return (sum(jcts) / len(jcts) / 3600 if jcts else None), len(jcts)


def run(load: float, teams_file: str, seed: int) -> dict:
    from frenzy.sched import get_policy
    from frenzy.sim.cluster import load_cluster
    from frenzy.sim.engine import SimConfig, Simulator
    from frenzy.sim.teams import load_teams, quota_cluster, quota_policy

    cluster = load_cluster(CLUSTER)
    jobs = load_slice(SLICE, cluster.total_gpus, load, seed=seed)
    spec = load_teams(teams_file)
    config = SimConfig(seed=seed)
    t0 = time.perf_counter()
    audited = quota_policy(get_policy("frenzy"), spec, jobs)
    shared = Simulator(cluster, audited, jobs, config).run()
    plain = Simulator(cluster, get_policy("frenzy"), jobs, config).run()
    rows = []
    for team, quota in spec.quotas.items():
        mine = [j for j in jobs if spec.team_of(j) == team]
        alone = Simulator(quota_cluster(cluster, quota, f"{team}-alone"), get_policy("frenzy"), mine, config).run()
        ids = {j["job_id"] for j in alone.jobs if j["jct_s"] is not None}  # run alone, every job its quota can hold
        ids &= {j["job_id"] for j in shared.jobs if j["jct_s"] is not None}
        a, n = _avg_h(alone, ids)
        s, _ = _avg_h(shared, ids)
        p, _ = _avg_h(plain, ids)
        rows.append(dict(team=team, quota=quota, jobs=len(mine), compared=n, alone_h=a, shared_h=s, plain_h=p,
                         rejected_alone=len(alone.rejected)))
    preempted = sum(j["preemptions"] for j in shared.jobs)
    return dict(load=load, rows=rows, violations=audited.violations, violating_jobs=len(audited.violating_jobs),
                by_choice=audited.waiting_by_choice,
                calls=audited.calls, preemptions=preempted, plain_preemptions=sum(j["preemptions"] for j in plain.jobs),
                shared_avg_h=_avg_h(shared, {j.job_id for j in jobs})[0],
                plain_avg_h=_avg_h(plain, {j.job_id for j in jobs})[0], wall_s=time.perf_counter() - t0)


def _f(x) -> str:
    return "—" if x is None else f"{x:.2f}"


def table(results: list[dict]) -> str:
    lines = ["## Teams and GPU quotas (`frenzy.sched.quotas`)", "",
             f"{SLICE.label} on {CLUSTER}, three teams from `bench/quota_teams.yaml` (every GPU in a quota: red and "
             "green 8 A100-40G + 8 RTX 2080 Ti + 8 T4 each, blue 8 RTX 2080 Ti + 8 T4; users are Philly's virtual "
             "clusters). *Alone*: the team's jobs on a cluster made of exactly its quota; *shared*: all jobs on the "
             "whole cluster under quotas (within-quota first, idle quota borrowed and reclaimed by preemption, fair "
             "share); *no quotas*: all jobs under plain HAS. Averages are over the team's jobs finished both alone "
             "and shared (a job whose plans need a GPU type its team has no quota of cannot run alone). A quota "
             "violation is a job left waiting by a scheduling call while borrowers hold GPUs its team's unused quota "
             "entitles it to and it needs (frenzy.sim.teams.QuotaAudit), counted once per call; *waited by "
             "choice* counts jobs that could have started within their quota on free GPUs of a type another team "
             "borrows and waited for a faster plan (HAS's patience), once per call.", "",
             "| load | team | jobs | compared | avg JCT alone h | shared h | no quotas h | shared vs alone |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        for row in r["rows"]:
            cut = f"{(row['shared_h'] / row['alone_h'] - 1) * 100:+.1f}%" if row["alone_h"] else "—"
            lines.append(f"| {r['load']:g} | {row['team']} | {row['jobs']} | {row['compared']} | "
                         f"{_f(row['alone_h'])} | {_f(row['shared_h'])} | {_f(row['plain_h'])} | {cut} |")
    lines += ["", "| load | quota violations | jobs violating | waited by choice | scheduling calls | preemptions "
              "with quotas | without | avg JCT all jobs, quotas h | no quotas h | wall s |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['load']:g} | {r['violations']} | {r['violating_jobs']} | {r['by_choice']} | "
                     f"{r['calls']} | {r['preemptions']} | {r['plain_preemptions']} | {_f(r['shared_avg_h'])} | "
                     f"{_f(r['plain_avg_h'])} | {r['wall_s']:.0f} |")
    rows = [row for r in results for row in r["rows"] if row["alone_h"] and row["shared_h"]]
    better = sum(row["shared_h"] < row["alone_h"] for row in rows)
    cost = [r["shared_avg_h"] / r["plain_avg_h"] - 1 for r in results if r["shared_avg_h"] and r["plain_avg_h"]]
    lines += ["", f"Shared with borrowing beat running alone on the quota for {better} of {len(rows)} team x load "
              f"runs. Against no quotas at all the average JCT over all jobs is "
              f"{', '.join(f'{c * 100:+.0f}%' for c in cost)} (loads {args_loads(results)}): the price of the "
              "guarantee. Each team's within-quota jobs are planned by HAS on the team's part of the cluster only, "
              "a borrower takes only GPUs idle now and no team's unused quota is lent while one of its jobs could "
              "claim it, and borrowers are preempted (each restart ~90 s) when the lender needs its GPUs back; "
              "without quotas HAS packs every job on the whole cluster."]
    return "\n".join(lines)


def args_loads(results: list[dict]) -> str:
    return ", ".join(f"{r['load']:g}" for r in results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", default="1,2", help="offered loads, comma-separated")
    parser.add_argument("--teams", default=str(Path(__file__).resolve().parent / "quota_teams.yaml"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    require_shared()
    results = [run(float(x), args.teams, args.seed) for x in args.loads.split(",")]
    text = table(results)
    print(text)
    if not args.no_write:
        write_section("sim-quotas", text)


if __name__ == "__main__":
    main()

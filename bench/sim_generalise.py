"""Does HAS's lead over the Sia-style policy hold on workloads and clusters it was not designed on?
Writes docs/BENCHMARKS.md#sim-generalise.

Runs: every trace of TRACES (the ten ElasticFlow clusters and Philly; one slice of JOBS jobs from the
middle of each, mapped to LLM jobs as frenzy.sim.workload does, seed 0) on every cluster of CLUSTERS,
each at the offered loads of LOADS (bench/sim_common.py: requested GPUs x trace duration over the
cluster's GPU-seconds in the arrival window; the arrival scale that gives it is printed).

Design and reporting halves, fixed before any result was looked at: the pair (trace i, cluster j),
with i and j the positions in TRACES and CLUSTERS, belongs to the DESIGN half when i + j is even and
to the REPORTING half when it is odd (a checkerboard: every trace and every cluster shape has pairs
in both halves, 28 design and 27 reporting pairs). Both loads of a pair go to the pair's half. HAS's
rules and constants are chosen on design runs only; the targets are judged on reporting runs only.

Per run: the average-JCT cut of frenzy (HAS) against sia over the jobs both finished
(frenzy.sim.result.compare_finished), the p99 JCT ratio over the same jobs, the GPU-hours ratio
(allocated GPU-hours of all jobs), useful utilisation of each, and OOM restarts of each. With
--objective cost every policy runs and the table shows each one's cost.

With --cluster NAME_OR_YAML every trace runs on that one cluster instead, outside both halves (half
"held-out"): a check of HAS on a shape none of its rules was chosen on, such as bench/cluster_odd96.yaml,
or on the user's own cluster. It writes docs/BENCHMARKS.md#sim-generalise-heldout (with --objective
cost, #sim-generalise-heldout-cost).

One simulation process at a time (the machine is shared). --baselines FILE keeps the runs of the
policies other than frenzy in a JSON file and reuses them: their code does not change while HAS's
does, and sia takes ~10x longer than HAS per run.
    python bench/sim_generalise.py [--half reporting|design|both] [--quick] [--objective time|cost]
                                   [--jobs 200] [--seed 0] [--baselines FILE] [--has NAME=VALUE ...]
                                   [--no-write] [--cluster NAME_OR_YAML]
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import write_section  # noqa: E402
from frenzy.sim.result import compare_finished  # noqa: E402
from sim_common import SHARED, Slice, arrival_scale_for, jct_records, load_slice, require_shared  # noqa: E402

TRACES = [(f"EF{i:02d}", f"traces/elasticflow/raw/cluster{i:02d}.csv") for i in range(1, 11)] + \
    [("Philly", "traces/philly/philly.csv")]
# sia-64: the Sia paper's three-type cluster; alibaba-openb at two scales (seven types, mostly 8-GPU
# nodes); testbed: three types on 4- and 8-GPU servers; alibaba-spot: other types (H800, H100, A800,
# L40S) and 1-GPU A10 nodes, which none of the others have.
CLUSTERS = ["sia-64", "alibaba-openb@128", "alibaba-openb@256", "testbed", "alibaba-spot@128"]
LOADS = (1.0, 2.0)
JOBS = 200
ALL_POLICIES = ["frenzy", "sia", "gavel", "opportunistic", "fifo"]
QUICK_PAIRS = 4  # per half, with --quick: the first pairs of the half
HELD_OUT = "held-out"  # the half of --cluster's runs


def half_of(trace_index: int, cluster_index: int) -> str:
    return "design" if (trace_index + cluster_index) % 2 == 0 else "reporting"


def pairs(half: str) -> list[tuple[str, str, str]]:
    """(trace label, trace path, cluster) of the pairs in `half` ('both': every pair)."""
    return [(label, path, cluster) for i, (label, path) in enumerate(TRACES) for j, cluster in enumerate(CLUSTERS)
            if half in ("both", half_of(i, j))]


def middle_slice(label: str, path: str, jobs: int) -> Slice:
    """`jobs` jobs from the middle of the trace (its start and end are often atypical: a cluster's
    first days, a trace cut mid-week)."""
    with open(SHARED / path) as f:
        rows = sum(1 for _ in f) - 1
    skip = max(0, (rows - jobs) // 2)
    return Slice(f"{label} jobs {skip}-{skip + min(jobs, rows) - 1}", path, skip, jobs)


def run_one(sl: Slice, cluster: str, load: float, policy: str, objective: str, has_options: dict,
            seed: int = 0) -> dict:
    from frenzy.sched import get_policy
    from frenzy.sched.policies.has import HeterogeneityAwareScheduler
    from frenzy.sim.cluster import load_cluster
    from frenzy.sim.engine import SimConfig, Simulator

    spec = load_cluster(cluster)
    jobs = load_slice(sl, spec.total_gpus, load, seed)
    scheduler = HeterogeneityAwareScheduler(**has_options) if policy == "frenzy" else get_policy(policy)
    t0 = time.perf_counter()
    result = Simulator(spec, scheduler, jobs, SimConfig(seed=seed, objective=objective)).run()
    summary = result.summary()
    summary.update(slice=sl.label, load=load, arrival_scale=arrival_scale_for(sl, spec.total_gpus, load),
                   bench_wall_s=time.perf_counter() - t0, jobs_jct=jct_records(result),
                   job_cost={j["job_id"]: j["cost_usd"] for j in result.jobs if j["jct_s"] is not None})
    return summary


def _key(sl: Slice, cluster: str, load: float, policy: str, objective: str, seed: int) -> str:
    return f"{policy} | {sl.path}:{sl.skip}+{sl.jobs} | {cluster} | load {load} | {objective}" + \
        (f" | seed {seed}" if seed else "")


def compare(ours: dict, sia: dict) -> dict:
    v = compare_finished(ours["jobs_jct"], sia["jobs_jct"])
    return {"cut": v.avg_cut, "p99": v.p99_ratio, "both": v.jobs,
            "gpu_h": ours["gpu_hours"] / max(sia["gpu_hours"], 1e-9)}


def _run_table(runs: list[dict]) -> str:
    lines = ["| half | trace slice | cluster | load (arrival scale) | frenzy avg JCT cut vs sia | p99 ratio | "
             "GPU-hours ratio | useful util frenzy / sia | OOM restarts frenzy / sia | finished frenzy / sia | "
             "jobs both finished |", "|---" * 11 + "|"]
    for r in runs:
        f, s, c = r["frenzy"], r["sia"], r["vs"]
        lines.append(f"| {r['half']} | {r['slice']} | {r['cluster']} | {r['load']:.1f} ({f['arrival_scale']:.3g}) | "
                     f"{c['cut']:+.1%} | {c['p99']:.2f} | {c['gpu_h']:.2f} | "
                     f"{f['utilisation_useful']:.0%} / {s['utilisation_useful']:.0%} | "
                     f"{f['oom_restarts']} / {s['oom_restarts']} | {f['finished']} / {s['finished']} | {c['both']} |")
    return "\n".join(lines)


def targets(runs: list[dict], half: str) -> str:
    mine = [r for r in runs if r["half"] == half]
    if not mine:
        return f"- {half} half: no runs"
    cuts = [r["vs"]["cut"] for r in mine]
    p99_ok = sum(r["vs"]["p99"] <= 1.0 for r in mine)
    ooms = sum(r["frenzy"]["oom_restarts"] for r in mine)
    gpu_ok = sum(r["vs"]["gpu_h"] <= 1.05 for r in mine)
    total_ratio = sum(r["frenzy"]["gpu_hours"] for r in mine) / sum(r["sia"]["gpu_hours"] for r in mine)

    def met(ok: bool) -> str:
        return "met" if ok else "MISSED"
    return (f"- {half} half, {len(mine)} runs: mean cut vs sia {sum(cuts) / len(cuts):+.1%} "
            f"({met(sum(cuts) / len(cuts) >= 0.25)} >= 25%); smallest {min(cuts):+.1%}, runs >= 15%: "
            f"{sum(c >= 0.15 for c in cuts)} of {len(mine)} ({met(min(cuts) >= 0.15)} every run); p99 no worse "
            f"than sia's in {p99_ok} of {len(mine)} ({met(p99_ok >= 0.9 * len(mine))} >= 90%); frenzy OOM "
            f"restarts {ooms} ({met(ooms == 0)} 0); GPU-hours within +5% of sia's in {gpu_ok} of {len(mine)} "
            f"runs ({met(gpu_ok == len(mine))} every run), {total_ratio:.2f}x sia's over all of them")


def common_costs(run: dict, policies: list[str]) -> tuple[int, dict[str, float]]:
    """Each policy's cost over the jobs every policy finished, and how many those are: a policy that
    gives up on a long job after out-of-memory failures would otherwise look cheap for not running it."""
    common = set.intersection(*(set(run[p]["job_cost"]) for p in policies))
    return len(common), {p: sum(run[p]["job_cost"][j] for j in common) for p in policies}


def cost_table(runs: list[dict]) -> str:
    policies = [p for p in ALL_POLICIES if all(p in r for r in runs)]
    lines = ["| half | trace slice | cluster | load | jobs all finished | " +
             " | ".join(f"{p} cost $" for p in policies) + " | frenzy lowest |", "|---" * (6 + len(policies)) + "|"]
    lowest_runs = 0
    for r in runs:
        jobs, costs = common_costs(r, policies)
        lowest = costs["frenzy"] <= min(costs.values())
        lowest_runs += lowest
        lines.append(f"| {r['half']} | {r['slice']} | {r['cluster']} | {r['load']:.1f} | {jobs} | " +
                     " | ".join(f"{costs[p]:,.0f} ({r[p]['cost_usd']:,.0f})" for p in policies) +
                     f" | {'yes' if lowest else 'NO'} |")
    return ("Cost of each policy over the jobs every policy finished (in brackets: over every job, each "
            "policy's own finished and given-up jobs).\n\n" + "\n".join(lines) +
            f"\n\nfrenzy's cost is the lowest of all policies in {lowest_runs} of {len(runs)} runs.")


COST_TARGET = ("\n\nUnder the cost objective the target is the lowest cost of all policies. The JCT, p99 and "
               "GPU-hours targets are judged under the time objective (the section above): a job ranked by cost "
               "waits for its cheapest plan, so its JCT is not what it buys.")


def _option(text: str) -> tuple[str, object]:
    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE such as elastic=False, got '{text}'")
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=["reporting", "design", "both"], default="reporting")
    parser.add_argument("--quick", action="store_true", help=f"the first {QUICK_PAIRS} pairs of each half")
    parser.add_argument("--objective", choices=["time", "cost"], default="time",
                        help="MARP's plan ranking; cost runs every policy and tabulates costs")
    parser.add_argument("--jobs", type=int, default=JOBS, help="jobs per slice")
    parser.add_argument("--loads", type=lambda t: tuple(float(x) for x in t.split(",")), default=LOADS)
    parser.add_argument("--baselines", type=Path, default=None,
                        help="JSON file of the other policies' runs, read and extended (frenzy is always run)")
    parser.add_argument("--has", type=_option, action="append", default=[],
                        help="a HeterogeneityAwareScheduler keyword for an ablation, e.g. elastic=False")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/BENCHMARKS.md as it is")
    parser.add_argument("--seed", type=int, default=0,
                        help="workload mapping and simulator seed (0 for the table in docs/BENCHMARKS.md)")
    parser.add_argument("--json", type=Path, default=None, help="write the per-run comparisons here")
    parser.add_argument("--cluster", default=None,
                        help="every trace on this cluster only (built-in name or YAML), outside both halves")
    args = parser.parse_args()
    require_shared()
    if args.jobs < 1:
        parser.error("--jobs must be >= 1")
    if args.seed < 0:
        parser.error("--seed must be >= 0")
    if args.cluster:
        from frenzy.core.errors import FrenzyError
        from frenzy.sim.cluster import load_cluster
        try:
            load_cluster(args.cluster)
        except (FrenzyError, OSError, ValueError) as exc:
            parser.error(f"--cluster: {exc}")
        halves = [HELD_OUT]
        chosen = [(HELD_OUT, (label, path, args.cluster)) for label, path in TRACES[:QUICK_PAIRS if args.quick else None]]
    else:
        halves = ["design", "reporting"] if args.half == "both" else [args.half]
        chosen = [(h, p) for h in halves for p in pairs(h)[:QUICK_PAIRS if args.quick else None]]
    policies = ALL_POLICIES if args.objective == "cost" else ["frenzy", "sia"]
    has_options = dict(args.has)
    stored = json.loads(args.baselines.read_text()) if args.baselines and args.baselines.exists() else {}
    runs, t0, simulations = [], time.time(), 0
    for half, (label, path, cluster) in chosen:
        sl = middle_slice(label, path, args.jobs)
        for load in args.loads:
            row = {"half": half, "slice": sl.label, "cluster": cluster, "load": load}
            for policy in policies:
                key = _key(sl, cluster, load, policy, args.objective, args.seed)
                if policy != "frenzy" and key in stored and (args.objective == "time" or "job_cost" in stored[key]):
                    row[policy] = stored[key]
                    continue
                row[policy] = run_one(sl, cluster, load, policy, args.objective,
                                      has_options if policy == "frenzy" else {}, args.seed)
                simulations += 1
                if policy != "frenzy" and args.baselines:
                    stored[key] = row[policy]
                    args.baselines.write_text(json.dumps(stored))
            row["vs"] = compare(row["frenzy"], row["sia"])
            runs.append(row)
            print(f"{half:9s} {sl.label:28s} {cluster:18s} load {load:.1f} (arrival scale "
                  f"{row['frenzy']['arrival_scale']:.3g}): cut {row['vs']['cut']:+.1%} p99 {row['vs']['p99']:.2f} "
                  f"GPU-h {row['vs']['gpu_h']:.2f} OOM {row['frenzy']['oom_restarts']}/{row['sia']['oom_restarts']}",
                  flush=True)
    wall = time.time() - t0
    if args.json:
        per_job = ("jobs_jct", "job_cost")
        args.json.write_text(json.dumps([{k: v for k, v in r.items() if k not in policies} |
                                         {p: {k: v for k, v in r[p].items() if k not in per_job} for p in policies}
                                         for r in runs]))
    options = f" HAS options {has_options}." if has_options else ""
    reused = f" (the other policies' runs read from {args.baselines})" \
        if len(runs) * len(policies) > simulations else ""
    title = "frenzy vs sia" if args.objective == "time" else "every policy's cost under the cost objective"
    where = (f"on one cluster outside both halves ({args.cluster}), none of whose pairs HAS's rules were chosen "
             "on" if args.cluster else
             f"on five cluster shapes ({', '.join(CLUSTERS)}); the trace x cluster pairs are split before any run "
             "into a design half (trace index + cluster index even) on which HAS's rules were chosen, and a "
             "reporting half (odd) on which the targets are judged")
    md = (f"## Does HAS generalise? {title} on {'a held-out cluster' if args.cluster else 'held-out traces and clusters'}"
          f"\n\nEvery trace (ten ElasticFlow clusters, Philly; {args.jobs} jobs from the middle of each) {where}, "
          f"at offered loads {', '.join(f'{x:.1f}' for x in args.loads)} (the arrival scale that gives each is in "
          "brackets). Cut, p99 ratio and GPU-hours ratio are "
          f"frenzy's against sia's; cut and p99 over the jobs both finished. Objective {args.objective}, "
          f"seed {args.seed}."
          f"{options}\n\n" + _run_table(runs) + "\n\n" +
          (cost_table(runs) + COST_TARGET if args.objective == "cost" else
           ("Targets, judged here as on the reporting half:\n" if args.cluster else
            "Targets (on the reporting half; the design half for reference):\n") +
           "\n".join(targets(runs, h) for h in halves)) +
          f"\n\n{simulations} simulations in {wall:.0f} s wall on one process{reused}.")
    print(md)
    if not args.no_write:
        # the held-out runs have sections of their own: they must not replace the two halves' tables
        write_section(("sim-generalise-heldout" if args.cluster else "sim-generalise") +
                      ("-cost" if args.objective == "cost" else ""), md)


if __name__ == "__main__":
    main()

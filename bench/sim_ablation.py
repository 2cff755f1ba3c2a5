"""What each part of HAS is worth: average JCT against `sia` with one part switched off at a time,
on the bench/sim_jct.py slices and on three more slices, for one or more seeds (trace mapping and
memory errors; a single run moves by several points from small changes, so constants are judged
over seeds). With --holdout-seeds, HAS's default is also run on seeds no constant was chosen on, as
one more row. Writes docs/BENCHMARKS.md#sim-ablation.
    python bench/sim_ablation.py [--seeds 0,1,2] [--holdout-seeds 6,7,8] [--processes 1]
"""

from __future__ import annotations

import argparse
import sys
import time
from multiprocessing import Pool
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import write_section  # noqa: E402
from frenzy.sim.result import compare_finished  # noqa: E402
from sim_common import Slice, jct_records, load_slice, require_shared, seeds_arg  # noqa: E402
from sim_jct import CLUSTERS, SLICES  # noqa: E402

EXTRA_SLICES = [
    Slice("ElasticFlow cluster02 (ef), jobs 3000-3399", "traces/elasticflow/ef/cluster02.csv", 3000, 400),
    Slice("ElasticFlow cluster05 (raw), jobs 0-299", "traces/elasticflow/raw/cluster05.csv", 0, 300),
    Slice("Philly, jobs 60000-60399", "traces/philly/philly.csv", 60000, 400),
]
DEFAULT = "HAS (default)"
VARIANTS = {  # label -> HeterogeneityAwareScheduler keyword arguments
    DEFAULT: {},
    "no joint assignment of a contended queue's head (was the default)": {"assign_jobs": False},
    "response ratio next instead of smallest work first (was the default)": {"order": "hrrn", "assign_jobs": False},
    "no elastic resizing": {"elastic": False},
    "wider plans also into GPUs the queue needs (was the default)": {"lean": False},
    "plans split over extra nodes taken as any other (was the default)": {"price_splits": False},
    "no re-queue of jobs on slow plans (was the default)": {"requeue_slow": False},
    "no preemption": {"preempt": False},
    "not time-aware (plain HAS)": {"time_aware": False},
}


def run_one(task) -> tuple[str, str, str, int, list[dict]]:
    from frenzy.sched import get_policy
    from frenzy.sched.policies.has import HeterogeneityAwareScheduler
    from frenzy.sim.cluster import load_cluster
    from frenzy.sim.engine import SimConfig, Simulator

    sl, cluster, variant, seed = task
    spec = load_cluster(cluster)
    policy = get_policy("sia") if variant == "sia" else HeterogeneityAwareScheduler(**VARIANTS[variant])
    jobs = load_slice(sl, spec.total_gpus, 1.0, seed=seed)
    return sl.label, cluster, variant, seed, jct_records(Simulator(spec, policy, jobs, SimConfig(seed=seed)).run())


def _row(label: str, variant: str, runs, seeds: list[int], results: dict) -> str:
    """One table row: the variant's cut against sia per run (mean over `seeds`), then over every run and seed;
    each cut over the jobs both finished."""
    cuts = {(s.label, c, seed): compare_finished(results[(s.label, c, variant, seed)],
                                                 results[(s.label, c, "sia", seed)]).avg_cut
            for s, c in runs for seed in seeds}
    per_run = [sum(cuts[(s.label, c, seed)] for seed in seeds) / len(seeds) for s, c in runs]
    every = list(cuts.values())
    return (f"| {label} | " + " | ".join(f"{x:+.0%}" for x in per_run) +
            f" | {sum(every) / len(every):+.1%} | {min(every):+.0%} | {sum(x >= 0.2 for x in every)} of {len(every)} |")


def _avg_jct(jcts: list[dict]) -> float:
    done = [j["jct_s"] for j in jcts if j["jct_s"] is not None]
    return sum(done) / len(done)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=seeds_arg, default=[0], help="comma-separated seeds, e.g. 0,1,2")
    parser.add_argument("--holdout-seeds", type=seeds_arg, default=[],
                        help="seeds on which only HAS's default (and sia) run, as one more row, e.g. 6,7,8")
    parser.add_argument("--processes", type=int, default=2, help="simulations run at once (1 on a shared machine)")
    args = parser.parse_args()
    if args.processes < 1:
        parser.error(f"--processes must be >= 1, got {args.processes}")
    seeds, holdout = args.seeds, args.holdout_seeds
    if set(seeds) & set(holdout):
        parser.error(f"--holdout-seeds must not repeat --seeds (both name {sorted(set(seeds) & set(holdout))})")
    require_shared()
    runs = [(s, c) for s in SLICES + EXTRA_SLICES for c in CLUSTERS]
    tasks = [(s, c, v, seed) for seed in seeds for s, c in runs for v in ["sia", *VARIANTS]] + \
        [(s, c, v, seed) for seed in holdout for s, c in runs for v in ["sia", DEFAULT]]
    t0 = time.time()
    if args.processes == 1:
        done = map(run_one, tasks)
        results = {(sl, c, v, seed): jcts for sl, c, v, seed, jcts in done}
    else:
        with Pool(args.processes) as pool:
            results = {(sl, c, v, seed): jcts for sl, c, v, seed, jcts in pool.map(run_one, tasks, chunksize=1)}
    wall = time.time() - t0
    extra = {s.label for s in EXTRA_SLICES}
    header = "| variant | " + " | ".join(f"{'extra ' if s.label in extra else ''}{s.label.split(',')[0]} / {c}"
                                         for s, c in runs) + " | mean | min | runs >= 20% |"
    lines = [header, "|---" * (len(runs) + 4) + "|"]
    lines += [_row(variant, variant, runs, seeds, results) for variant in VARIANTS]
    if holdout:
        lines.append(_row(f"{DEFAULT}, held-out seeds {', '.join(map(str, holdout))}", DEFAULT, runs, holdout, results))
    which = f"seed {seeds[0]}" if len(seeds) == 1 else f"mean over seeds {', '.join(map(str, seeds))}"
    over = which if len(seeds) == 1 else f"{which} (min and runs >= 20% count every run of every seed)"
    sia_row = f"| sia avg JCT h ({which}) | " + " | ".join(
        f"{sum(_avg_jct(results[(s.label, c, 'sia', seed)]) for seed in seeds) / len(seeds) / 3600:.2f}"
        for s, c in runs) + " | | | |"
    md = ("## What each part of HAS is worth\n\nAverage JCT cut against `sia` (1 - frenzy / sia, over the jobs both "
          f"finished) with one part of HAS switched off at a time, offered load 1.0, {over}. The first six runs are "
          "the `sim-jct` slices, on which HAS's older constants (the preemption "
          "factor) were chosen; the last six were held out from those choices. The newer ones "
          "(MAX_SHRINK_SLOWDOWN, REQUEUE_MIN_SPEEDUP, REQUEUE_MIN_GAIN, the queue order, ASSIGNED_JOBS "
          "and the assignment's OWN_TIME_WEIGHT) were chosen on all twelve runs over seeds 0-2 (ASSIGNED_JOBS over "
          "seeds 0-5), so no run is held out from them; the lean-plan rule and the guard before a job is stopped "
          "again (its restart: start-up + checkpoint restore) have no constant and were kept on "
          "bench/sim_generalise.py's design half" +
          (f"; the held-out row runs the default on seeds {', '.join(map(str, holdout))}, on which no constant was "
           "chosen, to show whether the constants fit the seeds they were chosen on rather than the workloads"
           if holdout else "") + ".\n\n" + "\n".join(lines + [sia_row]) +
          f"\n\n{len(tasks)} simulations in {wall:.0f} s wall on {args.processes} "
          f"process{'es' if args.processes > 1 else ''}.")
    print(md)
    write_section("sim-ablation", md)


if __name__ == "__main__":
    main()

"""How far HAS is from a good offline schedule on the slice where it is closest to its target against Sia.

The Philly slice arrives in bursts: a few hours in which dozens of one-GPU jobs arrive, quiet hours
between them. For each burst (an hour of the slice, counted from its first arrival, in which at least
MIN_BURST_JOBS jobs arrive) the table gives the burst's average JCT under `frenzy` and `sia`:
  - in the whole run;
  - the burst replayed alone (its arrivals shifted to start at 0): the difference is what the
    jobs before it cost the burst;
  - the burst with every job arriving at 0, and an offline schedule of that batch: every job's plan
    (any of its MARP plans) and the order of the jobs, chosen knowing every job in advance, by
    simulated annealing over a list schedule on a fluid cluster (each GPU type one pool of GPUs, no
    nodes, no fragmentation; a job starts when enough GPUs of its plan's type are free and runs
    start-up + steps x predicted step time). The relaxation is optimistic and the search is not
    exhaustive, so the offline figure is a good schedule, not a bound.
Jobs outside the bursts are summed apart. Writes docs/BENCHMARKS.md#sim-headroom.
    python bench/sim_headroom.py [--slice 2] [--cluster sia-64] [--seed 0] [--iters 200000]
"""

from __future__ import annotations

import argparse
import heapq
import math
import random
import sys
import time
from dataclasses import replace
from multiprocessing import Pool
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import write_section  # noqa: E402
from sim_common import load_slice, require_shared  # noqa: E402
from sim_jct import SLICES  # noqa: E402

MIN_BURST_JOBS = 40
TARGET_CUT = 0.20  # issue's target: frenzy's average JCT at least 20% below sia's
STARTUP_S = 60.0  # the simulator's start-up per placement (SimConfig.startup_s)


def simulate(task) -> dict[str, float]:
    """JCT by job id of one policy on one job list (a whole slice or a burst)."""
    from frenzy.sched import get_policy
    from frenzy.sim.cluster import load_cluster
    from frenzy.sim.engine import SimConfig, Simulator

    cluster, policy, jobs, seed = task
    result = Simulator(load_cluster(cluster), get_policy(policy), jobs, SimConfig(seed=seed)).run()
    return {j["job_id"]: j["jct_s"] for j in result.jobs if j["jct_s"] is not None}


def list_schedule(jobs: list[list[tuple]], capacity: dict[str, int], order: list[int], pick: list[int]) -> float:
    """Summed completion time of starting the jobs in `order`, each on its plan `pick[i]` (type,
    GPUs, run seconds), as soon as enough GPUs of that type are free (a heap of GPU free times)."""
    free = {t: [0.0] * m for t, m in capacity.items()}
    total = 0.0
    for i in order:
        gpu_type, gpus, run_s = jobs[i][pick[i]]
        pool = free[gpu_type]
        start = max(heapq.heappop(pool) for _ in range(gpus))
        for _ in range(gpus):
            heapq.heappush(pool, start + run_s)
        total += start + run_s
    return total


def offline_avg_jct(task) -> float:
    """Average JCT (s) of the best (order, plans) simulated annealing finds for a batch arriving at 0.
    Starts from every job on its leanest plan, smallest first; moves: another plan for one job, a
    swap of two jobs, one job moved elsewhere in the order; temperature falls linearly to 0."""
    from frenzy.sched import get_policy
    from frenzy.sched.shapes import step_seconds
    from frenzy.sim.cluster import load_cluster
    from frenzy.sim.engine import SimConfig, Simulator

    cluster, batch, seed, iters = task
    sim = Simulator(load_cluster(cluster), get_policy("frenzy"), batch, SimConfig(seed=seed))  # not run: its plans
    capacity = dict(sim.capacity)
    jobs = []
    for job in sim.jobs:
        seconds = step_seconds(job.queued)
        jobs.append([(c.gpu.name, c.num_gpus, STARTUP_S + job.spec.steps * seconds[id(c)])
                     for c in job.queued.plans if c.num_gpus <= capacity[c.gpu.name]])
    n = len(jobs)
    pick = [min(range(len(plans)), key=lambda p: plans[p][1] * plans[p][2]) for plans in jobs]
    order = sorted(range(n), key=lambda i: jobs[i][pick[i]][1] * jobs[i][pick[i]][2])
    current = best = list_schedule(jobs, capacity, order, pick)
    rng = random.Random(seed)
    start_temperature = 0.05 * current / n
    for k in range(iters):
        temperature = start_temperature * (1 - k / iters)
        new_order, new_pick = order, pick
        move = rng.random()
        if move < 0.5:
            new_pick = pick[:]
            i = rng.randrange(n)
            new_pick[i] = rng.randrange(len(jobs[i]))
        else:
            new_order = order[:]
            a, b = rng.randrange(n), rng.randrange(n)
            if move < 0.8:
                new_order[a], new_order[b] = new_order[b], new_order[a]
            else:
                new_order.insert(b, new_order.pop(a))
        value = list_schedule(jobs, capacity, new_order, new_pick)
        if value <= current or (temperature > 0 and rng.random() < math.exp((current - value) / temperature)):
            order, pick, current = new_order, new_pick, value
            best = min(best, value)
    return best / n


def _avg_min(jct: dict[str, float], ids: list[str]) -> float:
    return sum(jct[i] for i in ids) / len(ids) / 60


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slice", type=int, default=2, help="index into bench/sim_jct.py's slices (2: Philly)")
    parser.add_argument("--cluster", default="sia-64")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--iters", type=int, default=200_000, help="annealing moves per burst")
    args = parser.parse_args()
    if not 0 <= args.slice < len(SLICES):
        parser.error(f"--slice must be 0..{len(SLICES) - 1}")
    if args.seed < 0 or args.iters < 1:
        parser.error("--seed must be >= 0 and --iters >= 1")
    require_shared()
    from frenzy.sim.cluster import load_cluster

    sl, cluster, seed = SLICES[args.slice], args.cluster, args.seed
    jobs = load_slice(sl, load_cluster(cluster).total_gpus, 1.0, seed=seed)
    first = min(j.submit_time_s for j in jobs)
    by_hour: dict[int, list] = {}
    for j in jobs:
        by_hour.setdefault(int((j.submit_time_s - first) // 3600), []).append(j)
    bursts = {h: b for h, b in sorted(by_hour.items()) if len(b) >= MIN_BURST_JOBS}
    if not bursts:
        sys.exit(f"no hour of this slice has {MIN_BURST_JOBS} or more arrivals: nothing to compare")

    def shifted(batch, at_zero: bool):
        start = min(j.submit_time_s for j in batch)
        return [replace(j, submit_time_s=0.0 if at_zero else j.submit_time_s - start) for j in batch]

    sims = [(cluster, p, jobs, seed) for p in ("frenzy", "sia")]
    sims += [(cluster, p, shifted(b, z), seed)
             for b in bursts.values() for z in (False, True) for p in ("frenzy", "sia")]
    t0 = time.time()
    with Pool(2) as pool:
        batches = [(cluster, shifted(b, True), seed, args.iters) for b in bursts.values()]
        offline = pool.map_async(offline_avg_jct, batches)
        results = pool.map(simulate, sims, chunksize=1)
        offline = offline.get()
    whole = {"frenzy": results[0], "sia": results[1]}
    lines = ["| burst: hour, jobs | whole run: frenzy / sia | alone: frenzy / sia | all at 0: frenzy / sia | "
             "all at 0: offline schedule | frenzy vs offline (all at 0) |", "|---|---|---|---|---|---|"]
    in_bursts: set[str] = set()
    batch_sums = {"frenzy": 0.0, "offline": 0.0}  # summed JCT (h) of the bursts, each all at 0 and alone
    for k, (hour, batch) in enumerate(bursts.items()):
        ids = [j.job_id for j in batch]
        in_bursts.update(ids)
        alone_f, alone_s, zero_f, zero_s = (_avg_min(r, ids) for r in results[2 + 4 * k:6 + 4 * k])
        best = offline[k] / 60
        batch_sums["frenzy"] += zero_f * len(ids) / 60
        batch_sums["offline"] += best * len(ids) / 60
        in_run = f"{_avg_min(whole['frenzy'], ids):.1f} / {_avg_min(whole['sia'], ids):.1f}"
        lines.append(f"| {hour}, {len(ids)} | {in_run} | "
                     f"{alone_f:.1f} / {alone_s:.1f} | {zero_f:.1f} / {zero_s:.1f} | {best:.1f} | "
                     f"{zero_f / best - 1:+.0%} |")
    both = [i for i in whole["frenzy"] if i in whole["sia"]]
    summed = {p: sum(whole[p][i] for i in both) / 3600 for p in whole}
    outside = {p: sum(whole[p][i] for i in both if i not in in_bursts) / 3600 for p in whole}
    burst_sum = {p: summed[p] - outside[p] for p in whole}
    needed = (1 - TARGET_CUT) * summed["sia"]
    allowed = needed - outside["frenzy"]  # what the bursts may sum to, the jobs outside them as they are
    if allowed >= burst_sum["frenzy"]:
        verdict = f"met: the bursts may sum to {allowed:.0f} h in the whole run and sum to {burst_sum['frenzy']:.0f} h"
    else:
        verdict = (f"with the jobs outside the bursts as they are, the bursts would have to sum to {allowed:.0f} h in "
                   f"the whole run, {1 - allowed / burst_sum['frenzy']:.0%} below frenzy's {burst_sum['frenzy']:.0f} h")
    md = (f"## Headroom on {sl.label} / {cluster}\n\n`frenzy` and `sia` on the run where HAS is closest to the 20% "
          f"cut, split into its bursts (hours with >= {MIN_BURST_JOBS} arrivals); average JCT in minutes, "
          f"seed {seed}. `alone` replays a burst by itself; `all at 0` gives every job of the burst the same "
          "arrival; the "
          "offline schedule picks every job's plan and the order knowing the whole burst, on a fluid cluster "
          f"(simulated annealing, {args.iters:,} moves per burst; optimistic relaxation, not a bound).\n\n"
          + "\n".join(lines)
          + f"\n\nSummed JCT over the {len(both)} jobs both finished: frenzy {summed['frenzy']:.0f} h, sia "
          f"{summed['sia']:.0f} h (cut {1 - summed['frenzy'] / summed['sia']:+.1%}); the bursts carry "
          f"{burst_sum['frenzy']:.0f} / {burst_sum['sia']:.0f} h of it and the {len(set(both) - in_bursts)} "
          f"jobs outside them {outside['frenzy']:.0f} / {outside['sia']:.0f} h. A 20% cut needs frenzy's sum at or "
          f"below {needed:.0f} h: {verdict}. All at 0 and alone, frenzy's bursts sum to {batch_sums['frenzy']:.0f} h "
          f"and the offline schedules to {batch_sums['offline']:.0f} h.\n\n{len(sims)} simulations and {len(bursts)} "
          f"offline searches in {time.time() - t0:.0f} s wall on 2 processes.")
    print(md)
    write_section("sim-headroom", md)


if __name__ == "__main__":
    main()

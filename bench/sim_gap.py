"""Where HAS still loses to Sia: on each slice of bench/sim_jct.py and bench/sim_ablation.py, the
average-JCT cut over the jobs both policies finished, that cut without the longest 2% of jobs
(by their fastest predicted run), and those jobs' share of each policy's summed JCT. A few jobs
that run for days dominate the average on some slices; the table shows which. A second table
splits each policy's summed JCT into waiting and running and gives the GPU-hours each allocated:
it shows how HAS wins (shorter runs on better plans) and what it pays for that (longer waits, and
wider or slower plans that hold more GPU-hours). Writes docs/BENCHMARKS.md#sim-gap.
    python bench/sim_gap.py
"""

from __future__ import annotations

import sys
import time
from multiprocessing import Pool
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import write_section  # noqa: E402
from sim_ablation import EXTRA_SLICES  # noqa: E402
from sim_common import load_slice, require_shared  # noqa: E402
from sim_jct import CLUSTERS, SLICES  # noqa: E402

LONGEST_SHARE = 0.02


def run_one(task) -> tuple:
    from frenzy.sched import get_policy
    from frenzy.sched.shapes import step_seconds
    from frenzy.sim.cluster import load_cluster
    from frenzy.sim.engine import SimConfig, Simulator

    sl, cluster = task
    spec = load_cluster(cluster)
    jobs = load_slice(sl, spec.total_gpus, 1.0)
    jct, fastest, held, gpu_hours = {}, {}, {}, {}
    for policy in ("frenzy", "sia"):
        sim = Simulator(spec, get_policy(policy), jobs, SimConfig(seed=0))
        for j in sim.jobs:
            q = j.queued
            if q.plans:
                fastest[q.job_id] = q.spec.steps * step_seconds(q)["fastest"]
        result = sim.run()
        finished = [j for j in result.jobs if j["jct_s"] is not None]
        jct[policy] = {j["job_id"]: j["jct_s"] for j in finished}
        held[policy] = {j["job_id"]: j["held_s"] for j in finished}
        gpu_hours[policy] = result.summary()["gpu_hours"]
    both = sorted((i for i in jct["frenzy"] if i in jct["sia"] and i in fastest), key=fastest.get)
    longest = both[-max(1, round(LONGEST_SHARE * len(both))):]
    total = {p: sum(jct[p][i] for i in both) for p in jct}
    top = {p: sum(jct[p][i] for i in longest) for p in jct}
    running = {p: sum(held[p][i] for i in both) for p in jct}
    split = {p: ((total[p] - running[p]) / 3600, running[p] / 3600, gpu_hours[p]) for p in jct}
    return (sl.label, cluster, len(both), len(longest), 1 - total["frenzy"] / total["sia"],
            1 - (total["frenzy"] - top["frenzy"]) / (total["sia"] - top["sia"]),
            top["frenzy"] / total["frenzy"], top["sia"] / total["sia"], split)


def main() -> None:
    require_shared()
    tasks = [(s, c) for s in SLICES + EXTRA_SLICES for c in CLUSTERS]
    t0 = time.time()
    with Pool(2) as pool:
        rows = pool.map(run_one, tasks, chunksize=1)
    extra = {s.label for s in EXTRA_SLICES}
    header = ("| trace slice | cluster | jobs both finished | cut vs sia | cut without the longest 2% | "
              "longest 2%: share of frenzy's summed JCT | of sia's |")
    lines = [header, "|---|---|---|---|---|---|---|"]
    split_lines = ["| trace slice | cluster | frenzy: job-hours waiting / running | sia: waiting / running | "
                   "GPU-hours allocated, frenzy / sia |", "|---|---|---|---|---|"]
    for label, cluster, n, k, cut, cut_rest, share_f, share_s, split in rows:
        name = f"{'extra ' if label in extra else ''}{label}"
        lines.append(f"| {name} | {cluster} | {n} | {cut:+.1%} | {cut_rest:+.1%} ({n - k} jobs) | "
                     f"{share_f:.0%} | {share_s:.0%} |")
        (fw, fr, fg), (sw, sr, sg) = split["frenzy"], split["sia"]
        split_lines.append(f"| {name} | {cluster} | {fw:.0f} / {fr:.0f} | {sw:.0f} / {sr:.0f} | "
                           f"{fg:.0f} / {sg:.0f} ({fg / sg:.2f}x) |")
    md = ("## Where HAS still loses to Sia\n\nAverage-JCT cut against `sia` (1 - frenzy / sia) over the jobs both "
          "finished, seed 0, offered load 1.0; then the same without the longest 2% of jobs (by their fastest "
          "predicted run), and what share of each policy's summed JCT those few jobs carry.\n\n" + "\n".join(lines)
          + "\n\nThe same jobs' summed JCT split into time waiting (before the first start and between "
          "runs) and time running (start-ups and restores included), and every job's allocated GPU-hours:\n\n"
          + "\n".join(split_lines)
          + f"\n\n{2 * len(tasks)} simulations in {time.time() - t0:.0f} s wall on 2 processes.")
    print(md)
    write_section("sim-gap", md)


if __name__ == "__main__":
    main()

"""Simulator speed: 100,000+ jobs on a 1,000+ GPU cluster under `frenzy`; writes
docs/BENCHMARKS.md#sim-speed. Target: 100,000 jobs in <= 60 s on this 2-core machine.

No single trace here has 100,000 jobs (Philly, the largest, has 82,247), so the workload is every job
of the three largest traces in ../shared/traces, with no choice among their rows: Philly, ElasticFlow's
cluster04 (15,802) and cluster08 (13,047), each trace's first arrival at time 0, merged by arrival
time (111,096 jobs, original arrival times, mapped to LLM jobs). `--jobs N` keeps the first N
arrivals, for quicker runs that do not measure the target.
    python bench/sim_speed.py [--jobs N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import write_section  # noqa: E402
from sim_common import SHARED, require_shared  # noqa: E402


TARGET_JOBS = 100_000
TRACES = ("traces/philly/philly.csv", "traces/elasticflow/ef/cluster04.csv", "traces/elasticflow/ef/cluster08.csv")


WORKLOAD = ("every job of Philly and of ElasticFlow's cluster04 and cluster08, the three largest traces here, "
            "merged by arrival time, original arrival times, mapped to LLM jobs")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--cluster", default="alibaba-openb@1024")
    args = parser.parse_args()
    require_shared()
    t0, c0 = time.perf_counter(), time.process_time()
    from frenzy.sched import get_policy
    from frenzy.sim.cluster import load_cluster
    from frenzy.sim.engine import SimConfig, Simulator
    from frenzy.sim.workload import load_trace

    spec = load_cluster(args.cluster)
    jobs = sorted((job for path in TRACES for job in load_trace(SHARED / path)), key=lambda j: j.submit_time_s)
    jobs = jobs[:args.jobs]
    t1 = time.perf_counter()
    sim = Simulator(spec, get_policy("frenzy"), jobs, SimConfig())
    t2 = time.perf_counter()
    summary = sim.run().summary()
    t3 = time.perf_counter()
    total = t3 - t0
    cpu = time.process_time() - c0
    verdict = ("not measured by this run" if len(jobs) < TARGET_JOBS else "met" if total <= 60 else "MISSED")
    md = (f"## Simulator speed\n\n{len(jobs):,} jobs ({WORKLOAD}) on `{args.cluster}` ({spec.total_gpus:,} GPUs, "
          f"{len(spec.node_states())} nodes) under `frenzy`.\n\n"
          "| phase | seconds |\n|---|---|\n"
          f"| load + map the trace | {t1 - t0:.1f} |\n| plan every job shape (MARP) and admit | {t2 - t1:.1f} |\n"
          f"| discrete-event simulation | {t3 - t2:.1f} |\n| **total** | **{total:.1f}** ({cpu:.1f} CPU-s) |\n\n"
          f"Target: {TARGET_JOBS:,} jobs in <= 60 s: {verdict}. "
          f"{summary['finished']:,} jobs finished, "
          f"{summary['decisions']:,} scheduling calls, allocated utilisation {summary['utilisation_allocated']:.0%}, "
          f"average JCT {summary['avg_jct_s'] / 3600:.2f} h, OOM restarts {summary['oom_restarts']}.")
    print(md)
    write_section("sim-speed", md)


if __name__ == "__main__":
    main()

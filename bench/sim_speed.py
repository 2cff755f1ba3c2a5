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


# The same command on the code before the scheduler kept its readings across calls (commit 20a74f3), on
# this machine while other processes shared it; decisions identical (see the paragraph).
HISTORY = """\
Before (the same command and workload, the code of commit 20a74f3, run earlier on the shared machine):
296.0 s wall, 228.5 CPU-s (load 11.3 s, plan and admit 11.9 s, simulate 272.8 s wall), the same 227,023
scheduling calls. The totals of runs minutes apart on this shared machine do not compare (CPU time
too grows when the other processes load it); the simulation phase of the old and new code run back to
back, on the same jobs, does:

| jobs (simulation phase only) | before CPU s | after CPU s |
|---|---|---|
| 10,000 Philly jobs (rows 20,000+) | 10.9 | 6.8 |
| first 15,000 arrivals of this workload | 31.3 | 29.9 |

What changed (per-job records of 8,000 Philly jobs on `alibaba-openb@1024` and of 300 jobs on `sia-64` and
`testbed` under `frenzy` and `sia`, and frenzy's decisions on the sched-overhead states, checked
identical before and after): HAS's per-call readings are kept across calls and patched where the
cluster changed instead of rebuilt (the free GPUs per node, `frenzy.sched.pool`; the release schedule
of running jobs, `frenzy.sched.profile`; each running job's step times on its plan and its fastest
plan, `frenzy.sched.runfacts`), and the growth pass walks only a running job's faster plans. That cut
the calls of a lightly loaded cluster (Philly alone) by 38%, but this workload keeps jobs waiting
(Philly and ElasticFlow's two clusters overlap in their first 60 days), and there a call's time is
HAS's own work for the waiting jobs, untouched here (py-spy over the first 15,000 arrivals, share of
the whole run: trying to shrink running jobs for each waiting job 17%, pricing preemptions 16%,
re-queueing slow runners 11%, with loading and mapping the trace and planning its shapes the other
large part). The target needs that work incremental across calls (most calls retry the same shrinks
and preemptions for the same waiting jobs), which is a change to HAS's rules' code, not done here."""


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
    t1, c1 = time.perf_counter(), time.process_time()
    sim = Simulator(spec, get_policy("frenzy"), jobs, SimConfig())
    t2, c2 = time.perf_counter(), time.process_time()
    summary = sim.run().summary()
    t3, c3 = time.perf_counter(), time.process_time()
    total, cpu = t3 - t0, c3 - c0
    verdict = "not measured by this run" if len(jobs) < TARGET_JOBS else "met" if total <= 60 else \
        f"met in CPU time only ({cpu:.1f} CPU-s)" if cpu <= 60 else "MISSED"
    md = (f"## Simulator speed\n\n{len(jobs):,} jobs ({WORKLOAD}) on `{args.cluster}` ({spec.total_gpus:,} GPUs, "
          f"{len(spec.node_states())} nodes) under `frenzy`.\n\n"
          "| phase | wall s | CPU s |\n|---|---|---|\n"
          f"| load + map the trace | {t1 - t0:.1f} | {c1 - c0:.1f} |\n"
          f"| plan every job shape (MARP) and admit | {t2 - t1:.1f} | {c2 - c1:.1f} |\n"
          f"| discrete-event simulation | {t3 - t2:.1f} | {c3 - c2:.1f} |\n"
          f"| **total** | **{total:.1f}** | **{cpu:.1f}** |\n\n"
          f"Target: {TARGET_JOBS:,} jobs in <= 60 s: {verdict}. "
          f"{summary['finished']:,} jobs finished, "
          f"{summary['decisions']:,} scheduling calls, allocated utilisation {summary['utilisation_allocated']:.0%}, "
          f"average JCT {summary['avg_jct_s'] / 3600:.2f} h, OOM restarts {summary['oom_restarts']}."
          + ("" if len(jobs) < TARGET_JOBS else "\n\n" + HISTORY))
    print(md)
    write_section("sim-speed", md)


if __name__ == "__main__":
    main()

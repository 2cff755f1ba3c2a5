"""A default `frenzy simulate`: 200 Philly jobs on sia-64 under all five policies, timed per policy and
in all; writes docs/BENCHMARKS.md#simulate-default. Target: the whole command in < 60 s on this
2-core machine.

The command runs as a user types it (through Typer's CliRunner, in this process, so that each
policy's simulator can be timed from inside): wall and CPU time per policy (its simulator's set-up,
the admission of every job, and its run) and of the whole command (trace loading, output and
comparison included). CPU time is reported beside wall time because other processes share the
machine: the wall time of a run depends on them, its CPU time far less.
    python bench/simulate_default.py
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import write_section  # noqa: E402
from sim_common import ROOT, SHARED, require_shared  # noqa: E402

ARGS = ["simulate", "--trace", "../shared/traces/philly/philly.csv", "--cluster", "sia-64", "--max-jobs", "200"]
TARGET_S = 60.0


def _timed(clock: dict, name_of, method):
    """`method` wrapped to add its wall and CPU seconds to clock[policy name]."""
    def wrapper(self, *args, **kwargs):
        w, c = time.perf_counter(), time.process_time()
        try:
            return method(self, *args, **kwargs)
        finally:
            spent = clock.setdefault(name_of(self, *args), [0.0, 0.0])
            spent[0] += time.perf_counter() - w
            spent[1] += time.process_time() - c
    return wrapper


def run_command() -> tuple[dict, float, float, dict]:
    """Run the command; (per-policy [wall, CPU] s, whole wall s, whole CPU s, its --json document)."""
    from typer.testing import CliRunner

    from frenzy.cli.main import app
    from frenzy.sim.engine import Simulator

    clock: dict[str, list[float]] = {}
    init, run, rejections = Simulator.__init__, Simulator.run, Simulator.rejections
    Simulator.__init__ = _timed(clock, lambda self, cluster, policy, *a: policy.name, init)
    Simulator.run = _timed(clock, lambda self: self.policy.name, run)
    Simulator.rejections = _timed(clock, lambda self: self.policy.name, rejections)
    try:
        w, c = time.perf_counter(), time.process_time()
        result = CliRunner().invoke(app, [*ARGS, "--json"])
        wall, cpu = time.perf_counter() - w, time.process_time() - c
    finally:
        Simulator.__init__, Simulator.run, Simulator.rejections = init, run, rejections
    if result.exit_code != 0:
        sys.exit(f"`frenzy {' '.join(ARGS)}` failed ({result.exit_code}):\n{result.output[-2000:]}")
    return clock, wall, cpu, json.loads(result.stdout)


def markdown(clock: dict, wall: float, cpu: float, document: dict) -> str:
    rows = "\n".join(f"| {name} | {w:.1f} | {c:.1f} |" for name, (w, c) in clock.items())
    verdict = "met" if wall < TARGET_S else f"met in CPU time only ({cpu:.1f} CPU-s)" if cpu < TARGET_S else "MISSED"
    policies = "\n".join(
        f"| {p['policy']} | {p['finished']} | {p['given_up']} | {p['never_run']} | {p['avg_jct_s'] / 3600:.2f} | "
        f"{p['p99_jct_s'] / 3600:.2f} | {p['oom_restarts']} | {p['preemptions']:,} | {p['gpu_hours']:,.0f} | "
        f"{p['decisions']:,} |" for p in document["policies"])
    return (
        "## A default `frenzy simulate`: 200 Philly jobs, five policies\n\n"
        f"`frenzy {' '.join(ARGS)}` (all five policies, seed 0, arrival scale 1: offered load "
        f"{document['offered_load']:.2f}), run through Typer's CliRunner in one process. Per policy: its "
        "simulator's set-up (every job admitted and planned), its admission probes and its run.\n\n"
        "| policy | wall s | CPU s |\n|---|---|---|\n" + rows +
        f"\n| **whole command** | **{wall:.1f}** | **{cpu:.1f}** |\n\n"
        f"Target (< {TARGET_S:.0f} s on this machine): {verdict}.\n\n"
        "| policy | finished | given up | never run | avg JCT h | p99 JCT h | OOM fails | preempted | GPU-h | "
        "scheduling calls |\n|---|---|---|---|---|---|---|---|---|---|\n" + policies + "\n\n" + HISTORY)


HISTORY = """\
Before (issue 27): the command took ~630 s, 601 s of it in Gavel's LP: 22,858 scheduling rounds and
20,849 LP solves (`scipy.optimize.linprog`, built from scratch each time); Gavel alone took 1,018 s under
cProfile, and 194.0 CPU-s on 100 Philly jobs (22,864 rounds) where the new code took 20.8 CPU-s (22,797
rounds), both started together on the same loaded machine. Why so many solves: Gavel cached its LP under
the jobs in the order running-then-queued, and its rotation changes that split every round, so almost
every round solved again. Now the LP sees the jobs in arrival order and is solved only when the set
changes (an arrival, an end, an OOM resubmission); `frenzy.sched.maxmin` keeps the model in HiGHS and
adds or deletes a job's columns and rows, so each solve starts from the last basis (192 solves). The
per-round loop also stops once every GPU is given out."""


def main() -> None:
    require_shared()
    os.chdir(ROOT)  # the command's trace path is relative to the repository root, as in the docs
    if not (SHARED / "traces/philly/philly.csv").is_file():
        sys.exit(f"{SHARED / 'traces/philly/philly.csv'} is missing")
    clock, wall, cpu, document = run_command()
    md = markdown(clock, wall, cpu, document)
    print(md)
    write_section("simulate-default", md)


if __name__ == "__main__":
    main()

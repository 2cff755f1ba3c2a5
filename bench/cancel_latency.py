"""Cancel-to-cancelled latency behind a long queue: 1,000 jobs queued at once on SQLite, and on
PostgreSQL (a throwaway server, tests/postgres.py) with --postgres (every one a distinct request, so
none shares a plan), the control loop running as in `frenzy serve`
(ControlService, 0.5 s tick, a cancel nudges the loop), the in-process executor of the unit tests
(tests/unit/control/fakes.py) with 6 GPUs, so almost the whole queue waits. Cancels are requested
from the start, while the loop is still planning the queue, one every 0.2 s, and each is timed
from the request until the store says `cancelled`. Writes its table into docs/BENCHMARKS.md.

    .venv/bin/python bench/cancel_latency.py [--jobs 1000] [--cancels 100] [--unbounded] [--postgres]

--unbounded plans the whole queue in one step (plan_budget_s=None), as the loop did before.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from report import write_section  # noqa: E402

from frenzy.control.loop import ControlLoop, LoopSettings  # noqa: E402
from frenzy.control.ports import SystemClock  # noqa: E402
from frenzy.control.request import JobRequest  # noqa: E402
from frenzy.control.service import ControlService  # noqa: E402
from frenzy.control.states import JobState  # noqa: E402
from frenzy.control.store import SqlJobStore  # noqa: E402
from frenzy.core.units import GiB  # noqa: E402
from tests.unit.control.fakes import InProcessExecutor, node  # noqa: E402

TINY = str(ROOT / "examples" / "tiny-llama" / "config.json")


def request(i: int) -> JobRequest:
    return JobRequest.from_json({"model": TINY, "global_batch": [8, 16, 32][i % 3], "seq_len": [128, 256][i % 2],
                                 "steps": 100 + i, "priority": i % 3})


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def run(jobs: int, cancels: int, budget: float | None, seed: int = 0, db_url: str | None = None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        store = SqlJobStore(db_url or f"sqlite:///{tmp}/f.db")
        executor = InProcessExecutor([node("big-0", "A100-SXM-80G", 2, 3 * GiB),
                                      node("small-0", "A10G-24G", 4, int(1.5 * GiB))])
        clock = SystemClock()
        loop = ControlLoop(store=store, executor=executor, clock=clock,
                           settings=LoopSettings(storage_root=Path(tmp) / "jobs", plan_budget_s=budget))
        service = ControlService(store=store, executor=executor, clock=clock, loop=loop, tick_s=0.5)
        ids = []
        for i in range(jobs):
            r = request(i)
            ids.append(store.create_job(name=r.display_name(), request=r.to_json(), priority=r.priority,
                                        now=clock.now()).id)
        steps = []
        real_step = loop.step

        def timed_step():
            t = time.perf_counter()
            try:
                return real_step()
            finally:
                steps.append(time.perf_counter() - t)

        loop.step = timed_step
        service.start()
        latencies = []
        try:
            for job_id in random.Random(seed).sample(ids, cancels):
                t = time.perf_counter()
                service.cancel(job_id)
                while store.get_job(job_id).state is not JobState.CANCELLED:
                    time.sleep(0.005)
                latencies.append(time.perf_counter() - t)
                time.sleep(0.2)
        finally:
            service.stop()
        counts = store.count_by_state()
        store.close()
    return {"p50": statistics.median(latencies), "p99": percentile(latencies, 0.99), "max": max(latencies),
            "step_max": max(steps), "step_p50": statistics.median(steps), "steps": len(steps),
            "queued": counts[JobState.QUEUED], "planning": counts[JobState.PLANNING]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--cancels", type=int, default=100)
    parser.add_argument("--unbounded", action="store_true", help="also measure planning the whole queue per step")
    parser.add_argument("--postgres", action="store_true", help="also measure the bounded loop on PostgreSQL")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]  # timings on a shared machine: say how busy it was
    rows = [("bounded (plan_budget_s=0.5, cancels first)", run(args.jobs, args.cancels, 0.5))]
    if args.unbounded:
        rows.append(("unbounded (plan every queued job in one step)", run(args.jobs, args.cancels, None)))
    if args.postgres:
        from tests.postgres import local_postgres

        with local_postgres(port=5546) as url:
            rows.append(("bounded, PostgreSQL store", run(args.jobs, args.cancels, 0.5, db_url=url)))
    table = ("| loop | cancel p50 | cancel p99 | cancel max | step p50 / max | steps | left queued at the end |\n"
             "| --- | --- | --- | --- | --- | --- | --- |\n")
    for name, r in rows:
        table += (f"| {name} | {r['p50'] * 1000:.0f} ms | {r['p99'] * 1000:.0f} ms | {r['max'] * 1000:.0f} ms "
                  f"| {r['step_p50'] * 1000:.0f} ms / {r['step_max'] * 1000:.0f} ms | {r['steps']} "
                  f"| {r['queued']} |\n")
    unbounded = "".join(f"{r['step_max']:.0f} s here; " for name, r in rows if name.startswith("unbounded"))
    load = f"1-minute load average {load_before:.1f} at the start and {os.getloadavg()[0]:.1f} at the end"
    print(table + load)
    write_section("cancel_latency", f"## Cancel latency behind a long queue\n\n{args.jobs} distinct jobs queued "
                  f"at once (none shares a plan), real SQLite store (PostgreSQL where the row says so), loop as "
                  "in `frenzy serve` (0.5 s tick, a "
                  f"cancel nudges it), in-process executor with 6 GPUs; {args.cancels} cancels, one every 0.2 s "
                  "from the moment the queue is full, each timed from the request to `cancelled` in the store. "
                  "A bounded step plans the highest-priority unplanned jobs for 0.5 s and leaves the rest to "
                  "the next step; cancels are handled before anything else.\n\n" + table + f"\nOn 2 cores, {load}.\n" +
                  "\nThe bound is on the worst case: planning the whole queue in one step holds every cancel that "
                  f"arrives meanwhile for that whole step ({unbounded}it grows with the queue and the store's "
                  "latency, 55-100 s were seen with PostgreSQL), while a bounded step never holds one for much "
                  "more than its 0.5 s budget plus scheduling, at any queue length. More cancels wait for a "
                  "(short) step in the bounded loop, as planning goes on for longer, hence its higher p99.\n",
                  command="python bench/cancel_latency.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()

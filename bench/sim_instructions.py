"""Instructions the simulator executes on stretches of bench/sim_speed.py's workload: a measure of a
speed change that this machine's drifting speed does not blur (valgrind's callgrind counts the same on
every run). Used for round 6 in docs/BENCHMARKS.md#sim-speed.

    python bench/sim_instructions.py prepare      # maps the workload once, outside valgrind
    valgrind --tool=callgrind --callgrind-out-file=/dev/null python bench/sim_instructions.py run STRETCH

STRETCH is `contended` (arrivals 64,000-67,999, the workload's most contended stretch), `light` (its
first 5,000 arrivals) or `startup` (2 jobs: what starting up costs, to subtract). Each stretch is
simulated alone from an empty cluster, first arrival at time 0. `run` prints a digest of every job's
record: two versions of the code compare only where it is the same.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pickle
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

STRETCHES = {"contended": (64_000, 4_000), "light": (0, 5_000), "startup": (0, 2)}
CACHE = Path.home() / ".cache" / "frenzy-sim-instructions"  # the user's own: run() unpickles what is there


def prepare() -> None:
    from sim_common import SHARED, require_shared
    from sim_speed import TRACES
    from frenzy.sim.workload import load_trace

    require_shared()
    jobs = sorted((job for path in TRACES for job in load_trace(SHARED / path)), key=lambda j: j.submit_time_s)
    CACHE.mkdir(parents=True, exist_ok=True)
    for name, (start, count) in STRETCHES.items():
        stretch = jobs[start:start + count]
        first = stretch[0].submit_time_s
        (CACHE / f"{name}.pkl").write_bytes(pickle.dumps([replace(j, submit_time_s=j.submit_time_s - first)
                                                          for j in stretch]))
    print(f"stretches written to {CACHE}")


def run(name: str) -> None:
    from frenzy.sched import get_policy
    from frenzy.sim.cluster import load_cluster
    from frenzy.sim.engine import SimConfig, Simulator

    path = CACHE / f"{name}.pkl"
    if not path.exists():
        raise SystemExit(f"{path} is missing: run `python bench/sim_instructions.py prepare` first")
    jobs = pickle.loads(path.read_bytes())  # written by prepare above, from the shared traces
    result = Simulator(load_cluster("alibaba-openb@1024"), get_policy("frenzy"), jobs, SimConfig()).run()
    digest = hashlib.sha256(json.dumps(result.jobs, sort_keys=True, default=str).encode()).hexdigest()[:16]
    print(f"{name}: {len(jobs):,} jobs, {result.summary()['decisions']:,} scheduling calls, records {digest}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("action", choices=("prepare", "run"))
    parser.add_argument("stretch", nargs="?", choices=tuple(STRETCHES), default="contended")
    args = parser.parse_args()
    if args.action == "prepare":
        prepare()
    else:
        run(args.stretch)


if __name__ == "__main__":
    main()

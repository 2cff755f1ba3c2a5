"""Shared set-up of the simulator benchmarks: the shared-data folder, trace slices, load scaling."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(ROOT / "bench"))


@dataclass(frozen=True)
class Slice:
    label: str
    path: str  # relative to ../shared
    skip: int
    jobs: int

    @property
    def file(self) -> Path:
        return SHARED / self.path


def require_shared() -> None:
    if not SHARED.is_dir():
        sys.exit(f"shared data folder {SHARED} is missing; the benchmarks replay its traces")


def raw_rows(s: Slice):
    """The slice's raw rows (arrival, GPUs, duration) for computing its offered load."""
    from frenzy.sim.trace import detect_format, read_elasticflow, read_philly

    fmt = detect_format(s.file)
    rows = read_elasticflow(s.file) if fmt == "elasticflow" else read_philly(s.file)
    return sorted(rows, key=lambda r: r.submit_time_s)[s.skip:s.skip + s.jobs]


def arrival_scale_for(s: Slice, total_gpus: int, load: float) -> float:
    """Factor on submit times that makes the slice offer `load` x the cluster's GPU-seconds, counting
    each job's requested GPUs x its trace duration (on the trace's own hardware)."""
    rows = raw_rows(s)
    span = rows[-1].submit_time_s - rows[0].submit_time_s
    work = sum(min(r.num_gpus, 64) * r.duration_s for r in rows)
    return work / (load * total_gpus * max(span, 1.0))


def load_slice(s: Slice, total_gpus: int, load: float, seed: int = 0):
    from frenzy.sim.workload import load_trace, scale_arrivals

    jobs = load_trace(s.file, seed=seed, max_jobs=s.jobs, skip_jobs=s.skip)
    return scale_arrivals(jobs, arrival_scale_for(s, total_gpus, load))


def jct_records(result) -> list[dict]:
    """A SimResult's per-job JCTs (None where unfinished), all frenzy.sim.result.compare_finished reads:
    small enough to send back from a worker process."""
    return [{"job_id": j["job_id"], "jct_s": j["jct_s"]} for j in result.jobs]


def seeds_arg(text: str) -> list[int]:
    """argparse type for a comma-separated list of seeds (each >= 0, as SimConfig requires)."""
    parts = text.split(",")
    if not all(p.strip().isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"expected comma-separated integers >= 0 such as 0,1,2, got '{text}'")
    return [int(p) for p in parts]

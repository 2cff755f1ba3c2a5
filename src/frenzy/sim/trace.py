"""Job traces: Frenzy's canonical LLM trace CSV, and loaders for the public traces in ../shared.

Canonical format (one row per job; the last four columns may be empty):
    job_id,submit_time_s,model,global_batch,seq_len,steps,precision,method,requested_gpus,requested_gpu_type,user
`requested_gpu_type` is a catalog GPU name (aliases such as 'a100' are refused: they name several
parts) or `any` (an empty cell means the same; written out as `any`).
ElasticFlow (both its raw `job_id,submission_time,duration,num_gpu` and its `ef` format with a DL
model assigned) and Philly (`timestamp,duration,num_gpus,gpu_time,cluster`) rows carry no LLM job;
frenzy.sim.workload turns each into one by a documented, seeded mapping.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Callable

from frenzy.core.errors import InvalidConfigError
from frenzy.core.training import Method, Precision
from frenzy.sim.cluster import gpu_name

CANONICAL_COLUMNS = ("job_id", "submit_time_s", "model", "global_batch", "seq_len", "steps", "precision",
                     "method", "requested_gpus", "requested_gpu_type", "user")
FORMATS = ("auto", "frenzy", "elasticflow", "philly")
ANY_GPU_TYPE = "any"  # requested_gpu_type of a job that takes whatever type it is given
# The simulator's clock is float seconds: up to 2^53 microseconds (~285 years) a sum of times is still
# exact to the microsecond. A trace, an arrival scale or a job whose times go beyond it is refused.
MAX_TIME_S = 2.0 ** 53 * 1e-6


def check_seconds(value: float, what: str) -> None:
    """Raise a ValueError unless `value` is a number of seconds in [0, MAX_TIME_S] (NaN and infinity
    included: either would stall the simulator's clock)."""
    if not 0 <= value <= MAX_TIME_S:
        raise ValueError(f"{what} must be a number of seconds in [0, {MAX_TIME_S:.4g}] (~285 years), got {value}")


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceJob:
    """One row of the canonical trace."""

    job_id: str
    submit_time_s: float
    model: str
    global_batch: int
    seq_len: int
    steps: int
    precision: str = "fp16-mixed"
    method: str = "full"
    requested_gpus: int | None = None
    requested_gpu_type: str | None = None  # a catalog GPU name; None: any type
    user: str | None = None

    def __post_init__(self):
        if self.requested_gpu_type is not None:
            object.__setattr__(self, "requested_gpu_type",
                               gpu_name(self.requested_gpu_type, f"job {self.job_id}'s requested_gpu_type"))
        check_seconds(self.submit_time_s, f"job {self.job_id}: submit_time_s")
        for name in ("global_batch", "seq_len", "steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"job {self.job_id}: {name} must be >= 1, got {getattr(self, name)}")
        if self.requested_gpus is not None and self.requested_gpus < 1:
            raise ValueError(f"job {self.job_id}: requested_gpus must be >= 1 or empty")
        Precision(self.precision), Method(self.method)  # raise ValueError on unknown values


@dataclass(frozen=True, slots=True, kw_only=True)
class RawJob:
    """A GPU-cluster trace row before it becomes an LLM job: when, how many GPUs, for how long."""

    job_id: str
    submit_time_s: float
    duration_s: float
    num_gpus: int
    dl_model: str = ""  # ElasticFlow's assigned DL model (ef format)
    batch_size: int = 0  # ElasticFlow's per-job batch size (ef format)
    user: str = ""

    def __post_init__(self):
        check_seconds(self.submit_time_s, f"job {self.job_id}: submission time (from the trace's first)")
        check_seconds(self.duration_s, f"job {self.job_id}: duration")


def _opt_int(text: str) -> int | None:
    if text in ("", None):
        return None
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"expected a whole number, got {text!r}")
    return int(value)


def _rows(path: Path, required: tuple[str, ...]) -> list[tuple[int, dict]]:
    """(line, row) for every row of a CSV trace, in file order; a row lacking a cell of `required`, or a
    file that is not CSV text, is a ValueError naming the file (and line). A byte-order mark
    (spreadsheets write one) is not part of the first column's name."""
    rows = []
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            for row in reader:
                lacking = [c for c in required if row.get(c) is None]
                if lacking:
                    raise ValueError(f"{path}, line {reader.line_num}: no cell for {', '.join(lacking)}")
                rows.append((reader.line_num, row))
    except (csv.Error, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not a CSV text file ({exc})") from None
    return rows


def _each(path: Path, rows: list[tuple[int, dict]], build: Callable[[dict, int], object]) -> list:
    """build(row, its index) for each of `rows` (`_rows`); a row it refuses is an error
    (InvalidConfigError, a ValueError) naming the file and line."""
    out = []
    for index, (line, row) in enumerate(rows):
        try:
            out.append(build(row, index))
        except (ValueError, TypeError, OverflowError) as exc:
            raise InvalidConfigError(f"{path}, line {line}: {exc}") from None
    return out


def read_frenzy_csv(path: Path) -> list[TraceJob]:
    missing = set(CANONICAL_COLUMNS[:8]) - _header(path)
    if missing:
        raise ValueError(f"{path}: missing columns {sorted(missing)}; the header must be "
                         + ",".join(CANONICAL_COLUMNS))
    return _each(path, _rows(path, CANONICAL_COLUMNS[:8]), lambda r, _: TraceJob(
        job_id=r["job_id"], submit_time_s=float(r["submit_time_s"]), model=r["model"],
        global_batch=int(r["global_batch"]), seq_len=int(r["seq_len"]), steps=int(r["steps"]),
        precision=r["precision"] or "fp16-mixed", method=r["method"] or "full",
        requested_gpus=_opt_int(r.get("requested_gpus", "")),
        requested_gpu_type=_gpu_type_cell(r.get("requested_gpu_type")), user=r.get("user") or None))


def _gpu_type_cell(text: str | None) -> str | None:
    return None if text is None or text.strip().lower() in ("", ANY_GPU_TYPE) else text


def write_frenzy_csv(jobs: list[TraceJob], path: Path) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CANONICAL_COLUMNS)
        for j in jobs:
            writer.writerow([j.job_id, f"{j.submit_time_s:g}", j.model, j.global_batch, j.seq_len, j.steps,
                             j.precision, j.method, j.requested_gpus or "", j.requested_gpu_type or ANY_GPU_TYPE, j.user or ""])


def read_elasticflow(path: Path) -> list[RawJob]:
    """Either ElasticFlow format; submission times are shifted so the first job arrives at 0."""
    rows = _rows(path, ("job_id", "submission_time", "duration", "num_gpu"))
    times = _each(path, rows, lambda r, _: float(r["submission_time"]))
    start = min(times, default=0.0)
    return _each(path, rows, lambda r, i: RawJob(
        job_id=r["job_id"], submit_time_s=times[i] - start, duration_s=float(r["duration"]),
        num_gpus=int(r["num_gpu"]), dl_model=r.get("model_name") or "", batch_size=int(r.get("batch_size") or 0)))


def read_philly(path: Path) -> list[RawJob]:
    """Philly as preprocessed by the Sia artifact; rows are sorted by time, ids are row numbers."""
    rows = _rows(path, ("timestamp", "duration", "num_gpus"))
    times = _each(path, rows, lambda r, _: datetime.fromisoformat(r["timestamp"]).timestamp())
    start = min(times, default=0.0)
    jobs = _each(path, rows, lambda r, i: RawJob(
        job_id=f"philly-{i}", submit_time_s=times[i] - start, duration_s=float(r["duration"]),
        num_gpus=int(r["num_gpus"]), user=r.get("cluster") or ""))
    return sorted(jobs, key=lambda j: (j.submit_time_s, j.job_id))


# The columns that identify each trace format (the canonical one needs more to be read: CANONICAL_COLUMNS).
FORMAT_COLUMNS = {"frenzy": {"submit_time_s", "model", "steps"},
                  "elasticflow": {"submission_time", "duration", "num_gpu"},
                  "philly": {"timestamp", "duration", "num_gpus"}}


def _header(path: Path) -> set[str]:
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            return set(next(csv.reader(f), []))
    except (csv.Error, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not a CSV text file ({exc})") from None


def detect_format(path: Path) -> str:
    header = _header(path)
    for fmt, columns in FORMAT_COLUMNS.items():
        if columns <= header:
            return fmt
    raise ValueError(f"{path}: unrecognised trace header {sorted(header)}; use the canonical columns "
                     + ",".join(CANONICAL_COLUMNS) + " or an ElasticFlow/Philly trace")


def check_format(path: Path, fmt: str) -> None:
    """Raise a ValueError that names the missing columns (and the format the header does match)
    when a trace read as `fmt` lacks that format's identifying columns."""
    missing = FORMAT_COLUMNS[fmt] - _header(path)
    if missing:
        try:
            hint = f"; its header matches the {detect_format(path)} format: read it as that, or auto"
        except ValueError:
            hint = ""
        raise ValueError(f"{path} is not in the {fmt} format: it lacks the columns {sorted(missing)}{hint}")

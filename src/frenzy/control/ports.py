"""The control loop's collaborators, as Protocols, and the values that cross them.

The loop never imports ray: the Ray executor implements `Executor`, tests and benchmarks inject a
plain in-process one, and the clock is injected so `step()` runs on fake time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Protocol

from frenzy.control.records import AttemptRecord, JobRecord
from frenzy.control.states import AttemptOutcome, JobState
from frenzy.core.gpu import GpuType


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch (or any fixed origin)."""


class SystemClock:
    def now(self) -> float:
        return time.time()


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeInfo:
    """A live node as the executor sees it: its GPU type (with the memory it really has) and count."""

    name: str
    gpu_type: GpuType
    gpus: int
    alive: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class Launch:
    """One attempt to run: the plan, where, and what the workers need to build and train the model."""

    job_id: str
    attempt: int
    choice: dict[str, Any] = field(hash=False)  # PlanChoice.to_json()
    allocation: tuple[tuple[str, int], ...]
    worker_config: dict[str, Any] = field(hash=False)  # frenzy.train.config.WorkerConfig as JSON

    @property
    def num_workers(self) -> int:
        return sum(g for _, g in self.allocation)


@dataclass(frozen=True, slots=True, kw_only=True)
class Progress:
    """A per-step report gathered from the workers."""

    job_id: str
    attempt: int
    step: int
    metrics: dict[str, Any] = field(hash=False)  # loss, tokens_per_s, per-rank peak bytes, ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Finished:
    job_id: str
    attempt: int
    outcome: AttemptOutcome
    error: str = ""
    peak_bytes: tuple[int, ...] = ()  # observed per rank (for an OOM: at least this much was needed)
    peak_source: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class LogLines:
    job_id: str
    attempt: int
    lines: tuple[str, ...]


Event = Progress | Finished | LogLines


class Executor(Protocol):
    def nodes(self) -> list[NodeInfo]:
        """The live nodes and their GPUs (total, not free: the loop accounts for allocations)."""

    def check_feasible(self, launch: Launch) -> str | None:
        """None if the live nodes can hold this launch, else a reason (checked before submitting)."""

    def submit(self, launch: Launch) -> None: ...

    def poll(self) -> list[Event]:
        """Events since the last poll, oldest first."""

    def cancel(self, job_id: str, attempt: int) -> None: ...

    def is_running(self, job_id: str, attempt: int) -> bool:
        """Whether the attempt is still alive on the cluster (used to reconcile after a restart)."""

    def adopt(self, job_id: str, attempt: int) -> None:
        """Resume collecting events of an attempt started by a previous server process."""

    def free_gpus(self) -> dict[str, int] | None:
        """GPUs the cluster really has free per node (an ended attempt's placement group, or anything
        outside Frenzy, may still hold some); None when the executor cannot tell."""


class JobStore(Protocol):
    def create_job(self, *, name: str, request: dict, priority: int, now: float,
                   plans: Iterable[dict] = (), owner: str = ...) -> JobRecord: ...
    def get_job(self, job_id: str) -> JobRecord: ...
    def list_jobs(self, states: Iterable[JobState] | None = None, limit: int | None = None, *,
                  light: bool = False, cancel_requested: bool | None = None) -> list[JobRecord]: ...
    def count_by_state(self) -> dict[JobState, int]: ...
    def transition(self, job_id: str, target: JobState, *, now: float, **fields) -> JobRecord: ...
    def update_job(self, job_id: str, *, now: float, **fields) -> None: ...
    def request_cancel(self, job_id: str, *, now: float) -> JobRecord: ...
    def add_attempt(self, attempt: AttemptRecord) -> None: ...
    def update_attempt(self, job_id: str, number: int, **fields) -> AttemptRecord: ...
    def attempt(self, job_id: str, number: int) -> AttemptRecord: ...
    def attempts(self, job_id: str) -> list[AttemptRecord]: ...
    def append_logs(self, job_id: str, lines: Iterable[str], *, now: float) -> None: ...
    def logs(self, job_id: str, after: int = 0, limit: int = 10_000) -> list[tuple[int, float, str]]: ...
    def calibration(self) -> dict[tuple[str, str], tuple[float, int]]: ...
    def put_calibration(self, family: str, gpu_type: str, factor: float, samples: int, *, now: float) -> None: ...
    def list_teams(self) -> list: ...  # frenzy.control.teams.TeamRecord

"""What the store holds, as immutable values (rows are copied into these, never shared)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from frenzy.control.states import AttemptOutcome, JobState

# Who owns what is submitted on a loopback server without any token (the zero-setup default), and
# the jobs of a store created before users existed.
LOCAL_USER = "local"


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptRecord:
    job_id: str
    number: int  # 1-based
    outcome: AttemptOutcome
    choice: dict[str, Any] = field(hash=False)  # PlanChoice.to_json() of the plan it ran
    allocation: tuple[tuple[str, int], ...]
    started_at: float
    ended_at: float | None = None
    error: str = ""
    observed_peak_bytes: tuple[int, ...] = ()  # per rank; max over the attempt
    observed_source: str = ""  # "cuda" (max_memory_reserved), "measured-cpu" (fake GPU) or "oom-error"

    @property
    def gpu_type(self) -> str:
        return self.choice["gpu_type"]

    @property
    def predicted_device_bytes(self) -> int:
        return int(self.choice["memory"]["device_bytes"])

    @property
    def predicted_comparable_bytes(self) -> int:
        """MARP's figure for what the observation measures: a CUDA peak (max_memory_reserved) against
        the device bytes, a fake GPU's live tensor bytes against the allocated bytes, the need an
        out-of-memory error reported against the bytes that decided the fit (required_bytes)."""
        memory = self.choice["memory"]
        key = {"measured-cpu": "allocated_bytes", "oom-error": "required_bytes"}.get(self.observed_source,
                                                                                    "device_bytes")
        return int(memory.get(key) or memory["device_bytes"])


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRecord:
    id: str
    name: str
    state: JobState
    request: dict[str, Any] = field(hash=False)  # JobRequest.to_json()
    priority: int
    submitted_at: float
    updated_at: float
    plans: tuple[dict, ...] = ()  # ranked PlanChoice.to_json() from the latest planning
    chosen: dict | None = field(default=None, hash=False)  # the plan of the current/last attempt
    allocation: tuple[tuple[str, int], ...] = ()
    attempts: int = 0
    cancel_requested: bool = False
    failure_reason: str = ""
    progress: dict[str, Any] = field(default_factory=dict, hash=False)  # step, total_steps, loss, ...
    at_risk: bool = False
    placed_at: float | None = None  # first placement (for submit-to-placed latency)
    started_at: float | None = None
    finished_at: float | None = None
    owner: str = LOCAL_USER  # the submitting user (frenzy_users.name)

    @property
    def gpu_type(self) -> str | None:
        return self.chosen["gpu_type"] if self.chosen else None


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenRecord:
    """An API token as the store keeps it: its id and owner, never the token itself (only its hash)."""
    id: str
    user: str
    admin: bool  # the user's role (tokens carry no role of their own)
    created_at: float
    revoked_at: float | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

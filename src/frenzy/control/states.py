"""Job and attempt states as an explicit state machine; the store refuses any other transition."""

from __future__ import annotations

from enum import Enum


class JobState(Enum):
    QUEUED = "queued"  # accepted and validated, not yet planned against the live cluster
    PLANNING = "planning"  # ranked plans attached; waiting for the scheduler to place one
    PLACED = "placed"  # handed to the executor; workers starting
    RUNNING = "running"  # first report received
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)

    @property
    def is_active(self) -> bool:
        """Holds GPUs (its allocation counts against the cluster)."""
        return self in (JobState.PLACED, JobState.RUNNING)


_S = JobState
# RUNNING/PLACED -> PLANNING is the re-plan after an OOM or a lost attempt.
TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    _S.QUEUED: frozenset({_S.PLANNING, _S.FAILED, _S.CANCELLED}),
    _S.PLANNING: frozenset({_S.PLANNING, _S.PLACED, _S.FAILED, _S.CANCELLED}),
    _S.PLACED: frozenset({_S.RUNNING, _S.PLANNING, _S.SUCCEEDED, _S.FAILED, _S.CANCELLED}),
    _S.RUNNING: frozenset({_S.PLANNING, _S.SUCCEEDED, _S.FAILED, _S.CANCELLED}),
    _S.SUCCEEDED: frozenset(),
    _S.FAILED: frozenset(),
    _S.CANCELLED: frozenset(),
}


class InvalidTransitionError(RuntimeError):
    def __init__(self, job_id: str, current: JobState, target: JobState):
        allowed = ", ".join(sorted(s.value for s in TRANSITIONS[current])) or "none (terminal)"
        super().__init__(f"job {job_id}: cannot go from {current.value} to {target.value}; allowed: {allowed}")


def check_transition(job_id: str, current: JobState, target: JobState) -> None:
    if target not in TRANSITIONS[current]:
        raise InvalidTransitionError(job_id, current, target)


class AttemptOutcome(Enum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    OOM = "oom"
    FAILED = "failed"
    CANCELLED = "cancelled"
    LOST = "lost"  # its Ray actors vanished, or Ray never gave it its GPUs; re-planned, resumes from its checkpoint
    PREEMPTED = "preempted"  # stopped for a team reclaiming its quota; resumes from its checkpoint, never a failure

    @property
    def is_final(self) -> bool:
        return self is not AttemptOutcome.RUNNING


def parse_state(text: str) -> JobState:
    try:
        return JobState(text.strip().lower())
    except ValueError:
        raise ValueError(f"unknown job state '{text}'; choose one of: {', '.join(s.value for s in JobState)}") from None

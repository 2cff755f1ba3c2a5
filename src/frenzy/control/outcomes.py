"""What the loop does with executor events: progress into the store, finished attempts into job
states, OOMs into calibration and a re-plan."""

from __future__ import annotations

from dataclasses import dataclass, field

from frenzy.control.ports import Finished, JobStore, LogLines, Progress
from frenzy.control.records import JobRecord
from frenzy.control.states import AttemptOutcome, JobState
from frenzy.core.units import fmt_gib
from frenzy.memory import calibrate

AT_RISK_FRACTION = 0.95  # observed peak within 5% of the GPU's memory


@dataclass(slots=True)
class OutcomeCounters:
    oom_replans: int = 0
    lost_replans: int = 0
    preemptions: int = 0  # attempts stopped for a team reclaiming its quota
    succeeded: int = 0
    failed: int = 0
    observed_vs_predicted: list[tuple[str, float]] = field(default_factory=list)  # (gpu type, ratio)


def gpu_memory_bytes(job: JobRecord) -> int:
    return int(job.chosen.get("gpu_memory_bytes") or 0) if job.chosen else 0


def apply_progress(store: JobStore, job: JobRecord, event: Progress, now: float) -> None:
    peaks = [int(b) for b in event.metrics.get("peak_bytes", [])]
    attempt = store.attempt(job.id, event.attempt)
    merged = tuple(max(a, b) for a, b in zip(attempt.observed_peak_bytes, peaks)) if attempt.observed_peak_bytes \
        else tuple(peaks)
    if merged != attempt.observed_peak_bytes:
        store.update_attempt(job.id, event.attempt, observed_peak_bytes=merged,
                             observed_source=str(event.metrics.get("peak_source", "")))
    capacity = gpu_memory_bytes(job)
    at_risk = bool(capacity and merged and max(merged) >= AT_RISK_FRACTION * capacity)
    progress = {**job.progress, **{k: v for k, v in event.metrics.items() if k != "peak_bytes"},
                "step": event.step, "attempt": event.attempt, "peak_bytes": list(merged)}
    if job.state is JobState.PLACED:
        store.transition(job.id, JobState.RUNNING, now=now, progress=progress, at_risk=at_risk,
                         started_at=job.started_at or now)
    else:
        store.update_job(job.id, now=now, progress=progress, at_risk=at_risk)
    if at_risk and not job.at_risk:
        store.append_logs(job.id, [f"[frenzy] at risk: peak {fmt_gib(max(merged))} is within 5% of "
                                   f"{job.gpu_type}'s {fmt_gib(capacity)}"], now=now)


def apply_logs(store: JobStore, event: LogLines, now: float) -> None:
    store.append_logs(event.job_id, event.lines, now=now)


def _calibrate(store: JobStore, job: JobRecord, event: Finished, now: float, counters: OutcomeCounters) -> None:
    attempt = store.attempt(job.id, event.attempt)
    peaks = event.peak_bytes or attempt.observed_peak_bytes
    predicted = attempt.predicted_comparable_bytes
    if not peaks or predicted <= 0:
        return
    family = str(job.chosen.get("family", "")) if job.chosen else ""
    gpu = attempt.gpu_type
    factor, samples = store.calibration().get((family, gpu), (1.0, 0))
    before = calibrate.Correction(family=family, gpu_type=gpu, factor=factor, samples=samples)
    after = calibrate.observe(before, predicted, max(peaks),
                              oom=event.outcome is AttemptOutcome.OOM)
    store.put_calibration(family, gpu, after.factor, after.samples, now=now)
    counters.observed_vs_predicted.append((gpu, max(peaks) / predicted))


def apply_finished(store: JobStore, job: JobRecord, event: Finished, now: float,
                   counters: OutcomeCounters) -> bool:
    """Record the attempt's end and move the job on. Returns True when the job needs a re-plan."""
    store.update_attempt(job.id, event.attempt, outcome=event.outcome, ended_at=now, error=event.error[-4000:],
                         **({"observed_peak_bytes": event.peak_bytes, "observed_source": event.peak_source}
                            if event.peak_bytes else {}))
    if event.outcome in (AttemptOutcome.SUCCEEDED, AttemptOutcome.OOM):
        _calibrate(store, job, event, now, counters)
    if job.state.is_terminal:
        return False
    if event.outcome is AttemptOutcome.SUCCEEDED:
        counters.succeeded += 1
        store.transition(job.id, JobState.SUCCEEDED, now=now, finished_at=now)
        return False
    if event.outcome is AttemptOutcome.CANCELLED:
        store.transition(job.id, JobState.CANCELLED, now=now, finished_at=now)
        return False
    max_attempts = int(job.request.get("limits", {}).get("max_attempts", 3))
    retry = event.outcome in (AttemptOutcome.OOM, AttemptOutcome.LOST) and counted_attempts(store, job) < max_attempts
    what = {AttemptOutcome.OOM: "ran out of GPU memory", AttemptOutcome.LOST: "was lost"}.get(
        event.outcome, "failed")
    plan = f"{job.chosen.get('describe', '')} on {job.gpu_type}" if job.chosen else "its plan"
    if retry:
        if event.outcome is AttemptOutcome.OOM:
            counters.oom_replans += 1
            peak = f", observed >= {fmt_gib(max(event.peak_bytes))}" if event.peak_bytes else ""
            line = (f"[frenzy] attempt {event.attempt} {what} ({plan}, predicted "
                    f"{fmt_gib(store.attempt(job.id, event.attempt).predicted_comparable_bytes)}{peak}); "
                    "re-planning with more headroom and resuming from the last checkpoint")
        else:
            counters.lost_replans += 1
            line = f"[frenzy] attempt {event.attempt} {what} ({event.error}); re-planning and resuming"
        store.append_logs(job.id, [line], now=now)
        store.transition(job.id, JobState.PLANNING, now=now, allocation=())
        return True
    counters.failed += 1
    reason = (f"attempt {event.attempt} {what} ({plan}): {_first_line(event.error)}"
              + (f"; gave up after {counted_attempts(store, job)} attempts (raise limits.max_attempts to try more)"
                 if event.outcome in (AttemptOutcome.OOM, AttemptOutcome.LOST) else ""))
    store.transition(job.id, JobState.FAILED, now=now, finished_at=now, failure_reason=reason, allocation=())
    store.append_logs(job.id, [f"[frenzy] failed: {reason}"], now=now)
    return False


def counted_attempts(store: JobStore, job: JobRecord) -> int:
    """Attempts that count against max_attempts: all but those preempted (a preemption is the
    cluster's choice, never the job's failure)."""
    if not job.attempts:
        return 0
    return sum(1 for a in store.attempts(job.id) if a.outcome is not AttemptOutcome.PREEMPTED)


def apply_preempted(store: JobStore, job: JobRecord, reason: str, now: float) -> None:
    """Record a preemption: the attempt ends PREEMPTED and the job waits for GPUs again, resuming
    from its last checkpoint (the executor has stopped the attempt)."""
    store.update_attempt(job.id, job.attempts, outcome=AttemptOutcome.PREEMPTED, ended_at=now, error=reason)
    store.transition(job.id, JobState.PLANNING, now=now, allocation=())
    store.append_logs(job.id, [f"[frenzy] attempt {job.attempts} preempted ({reason}); it resumes from its last "
                               "checkpoint when GPUs free (not counted against max_attempts)"], now=now)


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:500] if lines else "no error message"

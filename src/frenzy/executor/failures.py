"""What ended an attempt, read from the exception its training run raised: out of memory, lost
GPUs, or a failure. Free of Ray, so any executor can use it."""

from __future__ import annotations

import traceback

# What Ray Train raises when the attempt's GPUs are not there (matched by name: the classes live in
# Ray Train's internal modules): they never came free, or the cluster no longer has them (a node
# left). The attempt is lost, not failed: the job is re-planned and resumes from its checkpoint.
PLACEMENT_LOST = {"WorkerGroupStartupTimeoutError", "WorkerGroupStartupFailedError",
                  "InsufficientClusterResourcesError", "PreemptionError"}


def classify(exc: BaseException) -> tuple[str, str]:
    """('oom' | 'lost' | 'failed', message) from what `fit()` raised."""
    import torch

    causes: list[BaseException] = []
    failures = getattr(exc, "worker_failures", None) or {}
    causes += list(failures.values()) if isinstance(failures, dict) else []
    seen = exc
    while seen is not None and len(causes) < 20:
        causes.append(seen)
        controller = getattr(seen, "controller_failure", None)
        if isinstance(controller, BaseException):
            causes.append(controller)
        seen = seen.__cause__ or seen.__context__
    lost = next((c for c in causes if type(c).__name__ in PLACEMENT_LOST), None)
    if lost is not None:
        return "lost", f"Ray did not give it its GPUs: {type(lost).__name__}: {str(lost).split('. ')[0]}"
    text = "\n".join(f"{type(c).__name__}: {c}" for c in causes) or "".join(traceback.format_exception(exc))
    oom = any(isinstance(c, torch.OutOfMemoryError) for c in causes) or "OutOfMemoryError" in text \
        or "CUDA out of memory" in text
    return ("oom" if oom else "failed"), text[-8000:]

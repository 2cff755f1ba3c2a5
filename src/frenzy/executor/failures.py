"""What ended an attempt, read from the exception its training run raised: out of memory, lost
(the cluster took it away), or a failure of the job's own.

Decided on exception types found anywhere in the chain (causes, contexts, Ray Train's
`worker_failures` / `controller_failure`, a health check's `health_check_failure`, a task error's
`cause`), not on message text, except for the CUDA allocator's own "CUDA out of memory" when the
original exception could not travel back as itself.

- `oom`: the job needed more GPU memory than its plan gave it (torch's `OutOfMemoryError`, not
  Ray's, which is about host RAM) -> re-planned with more headroom.
- `lost`: anything that is not the job's own doing: a worker, actor, raylet or node that died, an
  object lost with its node, Ray's memory monitor killing a worker for host RAM, GPUs that never
  came -> re-planned from the last checkpoint within `limits.max_attempts`.
- `failed`: the job's own exception (user code, bad data found late, NaN loss ...).
"""

from __future__ import annotations

import traceback

# Ray Train's own classes for GPUs that never came or left (PreemptionError is public, the others
# live in an internal module whose path may move, so these are matched by class name).
PLACEMENT_LOST = {"WorkerGroupStartupTimeoutError", "WorkerGroupStartupFailedError",
                  "InsufficientClusterResourcesError", "PreemptionError"}
# A worker that stopped answering Ray Train's health check (its process was killed, or hangs).
HEALTH_LOST = {"WorkerHealthCheckFailedError", "WorkerHealthCheckTimeoutError"}
MAX_CAUSES = 40


def _system_errors() -> tuple[type, ...]:
    """Ray's public classes for a process, node or object the cluster lost."""
    from ray import exceptions as rx

    return (rx.RayActorError, rx.WorkerCrashedError, rx.LocalRayletDiedError, rx.NodeDiedError,
            rx.ObjectLostError, rx.OutOfMemoryError, rx.OutOfDiskError, rx.ObjectStoreFullError,
            rx.RpcError, rx.TaskPlacementGroupRemoved, rx.ActorPlacementGroupRemoved)


def causes_of(exc: BaseException) -> list[BaseException]:
    """`exc` and every exception it carries, breadth first, each once."""
    out: list[BaseException] = []
    todo = [exc]
    while todo and len(out) < MAX_CAUSES:
        seen = todo.pop(0)
        if not isinstance(seen, BaseException) or any(seen is c for c in out):
            continue
        out.append(seen)
        failures = getattr(seen, "worker_failures", None)
        if isinstance(failures, dict):
            todo += [failures[k] for k in sorted(failures, key=str)]
        for attr in ("controller_failure", "health_check_failure", "_base_exc", "cause"):
            todo.append(getattr(seen, attr, None))
        todo += [seen.__cause__, seen.__context__]
    return out


def _is_lost(cause: BaseException, system: tuple[type, ...]) -> bool:
    name = type(cause).__name__
    if name in PLACEMENT_LOST or name == "WorkerHealthCheckTimeoutError":
        return True
    if name == "WorkerHealthCheckFailedError":
        # A dead worker process fails its health check with a Ray error; a value the training
        # function produced that cannot be sent back fails it with a plain one: the job's own.
        failure = getattr(cause, "health_check_failure", None)
        return failure is None or isinstance(failure, system) or _is_ray_error(failure)
    return isinstance(cause, system)


def _is_ray_error(exc: BaseException) -> bool:
    from ray import exceptions as rx

    return isinstance(exc, rx.RayError) and not isinstance(exc, (rx.RayTaskError, rx.UnserializableException))


def _is_torch_oom(cause: BaseException) -> bool:
    import torch

    return isinstance(cause, torch.OutOfMemoryError) or "CUDA out of memory" in str(cause)


def classify(exc: BaseException) -> tuple[str, str]:
    """('oom' | 'lost' | 'failed', message) from what `fit()` raised."""
    causes = causes_of(exc)
    system = _system_errors()
    # An OOM on one rank often takes the others down with it: the OOM is the reason.
    if any(_is_torch_oom(c) for c in causes):
        return "oom", _text(causes, exc)
    lost = next((c for c in causes if _is_lost(c, system)), None)
    if lost is not None:
        first = str(lost).strip().split("\n")[0].split(". ")[0]
        if type(lost).__name__ in PLACEMENT_LOST:
            return "lost", f"Ray did not give it its GPUs: {type(lost).__name__}: {first}"
        detail = next((c for c in causes if isinstance(c, system) and c is not lost), None)
        more = f" ({type(detail).__name__}: {str(detail).strip().split(chr(10))[0][:300]})" if detail else ""
        return "lost", f"the cluster lost it: {type(lost).__name__}: {first[:300]}{more}"
    return "failed", _text(causes, exc)


def _text(causes: list[BaseException], exc: BaseException) -> str:
    text = "\n".join(f"{type(c).__name__}: {c}" for c in causes) or "".join(traceback.format_exception(exc))
    return text[-8000:]

"""How an attempt's end is read from what Ray Train's `fit()` raises, on Ray Train's own exception
types: missing GPUs are a lost placement (re-planned), out of memory is an OOM, anything else fails."""

from __future__ import annotations

import pytest

pytest.importorskip("ray", reason="needs the ray extra (make test installs it)")
torch = pytest.importorskip("torch")

from ray.train import ControllerError, WorkerGroupError  # noqa: E402
from ray.train.v2._internal.exceptions import (InsufficientClusterResourcesError,  # noqa: E402
                                               WorkerGroupStartupTimeoutError)

from frenzy.executor.failures import classify  # noqa: E402


def test_gpus_that_never_came_are_a_lost_placement():
    outcome, message = classify(ControllerError(WorkerGroupStartupTimeoutError(num_workers=2)))
    assert outcome == "lost"
    assert message.startswith("Ray did not give it its GPUs: WorkerGroupStartupTimeoutError")
    assert "\n" not in message  # one line for the job's log
    assert classify(ControllerError(InsufficientClusterResourcesError("no A100 left")))[0] == "lost"


def test_a_rank_out_of_memory_is_an_oom_and_other_errors_fail():
    oom = WorkerGroupError("rank 1 failed", {1: torch.OutOfMemoryError("CUDA out of memory")})
    assert classify(oom)[0] == "oom"
    outcome, message = classify(WorkerGroupError("rank 0 failed", {0: ValueError("bad batch")}))
    assert outcome == "failed" and "bad batch" in message


# ---- faults that are not the job's own: lost, so the job is re-planned from its checkpoint ------

from ray import exceptions as rx  # noqa: E402
from ray.train.v2._internal.exceptions import (WorkerHealthCheckFailedError,  # noqa: E402
                                               WorkerHealthCheckTimeoutError)


def _rank_failed(rank_error: BaseException) -> WorkerGroupError:
    """What Ray Train v2's fit() raises when a rank's poll ends in `rank_error` (poll.py)."""
    return WorkerGroupError(f"[Rank 1 Error Snippet]:\n{rank_error}", {1: rank_error})


def test_a_killed_worker_process_is_lost_not_failed():
    died = rx.ActorDiedError()  # what ray.get on the dead worker's poll raises (kill -9 of its process)
    outcome, message = classify(_rank_failed(WorkerHealthCheckFailedError("A worker health check failed.", died)))
    assert outcome == "lost"
    assert message.startswith("the cluster lost it: WorkerHealthCheckFailedError") and "ActorDiedError" in message
    assert "\n" not in message


def test_ray_memory_monitor_and_dead_nodes_are_lost():
    # Ray's OutOfMemoryError is host RAM (the memory monitor killed the worker): not the job's GPU plan
    host_oom = rx.OutOfMemoryError("Task was killed due to the node running low on memory.")
    cases = [host_oom, rx.NodeDiedError("node 1a2b died"), rx.WorkerCrashedError(), rx.LocalRayletDiedError(),
             rx.ObjectLostError("ab" * 14, None, ""), rx.OwnerDiedError("ab" * 14, None, ""),
             rx.RayActorError(error_msg="the actor is gone"), rx.ActorUnavailableError("restarting", b"\0" * 16),
             WorkerHealthCheckTimeoutError("A worker health check has been hanging for 600 s.")]
    for error in cases:
        assert classify(_rank_failed(error))[0] == "lost", error
        assert classify(ControllerError(error))[0] == "lost", error
    try:  # found through __cause__ as well
        try:
            raise host_oom
        except rx.OutOfMemoryError as inner:
            raise RuntimeError("training run ended") from inner
    except RuntimeError as outer:
        assert classify(outer)[0] == "lost"


def test_the_jobs_own_errors_fail_even_inside_ray_wrappers():
    nan = FloatingPointError("loss is NaN at step 7")
    wrapped = rx.RayTaskError("train_fn", "Traceback ...", nan).as_instanceof_cause()
    for error in (nan, wrapped, KeyError("input_ids"), ValueError("row 3981 has no text")):
        outcome, message = classify(_rank_failed(error))
        assert outcome == "failed", error
    assert "loss is NaN" in classify(_rank_failed(wrapped))[1]
    # a value the training function returned that cannot travel back also fails the health check,
    # with a plain (not Ray) error: still the job's own
    unpicklable = WorkerHealthCheckFailedError("A worker health check failed.", TypeError("cannot pickle 'generator'"))
    assert classify(_rank_failed(unpicklable))[0] == "failed"


def test_cuda_oom_stays_an_oom_even_when_another_rank_died():
    cuda = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    error = WorkerGroupError("ranks failed", {0: cuda, 1: WorkerHealthCheckFailedError("gone", rx.ActorDiedError())})
    assert classify(error)[0] == "oom"
    # Ray's host OutOfMemoryError never counts as a GPU OOM
    assert classify(_rank_failed(rx.OutOfMemoryError("node low on memory")))[0] == "lost"

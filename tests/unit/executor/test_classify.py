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

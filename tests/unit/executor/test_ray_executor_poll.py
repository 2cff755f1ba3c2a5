"""The Ray executor's poll when an attempt runner is gone: Ray's memory monitor killed it (the poll
itself answers OutOfMemoryError), or it died: the attempt is lost and the loop goes on; an error
that says nothing about the runner's death is retried next step, never raised into the loop."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("ray", reason="needs the ray extra (make test installs it)")
pytest.importorskip("torch")

from ray import exceptions as rx  # noqa: E402

from frenzy.control.ports import Finished  # noqa: E402
from frenzy.control.states import AttemptOutcome  # noqa: E402
from frenzy.executor import ray_executor  # noqa: E402


class _Method:
    def remote(self, *args):
        return "ref"


class _Runner:
    poll = _Method()


def _executor(monkeypatch, error: Exception):
    ex = ray_executor.RayExecutor.__new__(ray_executor.RayExecutor)  # no Ray cluster needed
    ex.storage_root, ex._active, ex._next_sweep = Path("/tmp"), {}, 10**12
    ex._active[("j-1", 1)] = ray_executor._Tracked(_Runner())
    killed = []

    def get(ref, timeout=None):
        raise error

    monkeypatch.setattr(ray_executor.ray, "get", get)
    monkeypatch.setattr(ray_executor.ray, "kill", lambda handle, no_restart: killed.append(handle))
    return ex, killed


@pytest.mark.parametrize("error", [
    rx.OutOfMemoryError("2 worker(s) were killed due to the node running low on memory."),
    rx.ActorDiedError(), rx.NodeDiedError("node gone")])
def test_a_runner_the_cluster_took_away_is_a_lost_attempt(monkeypatch, error):
    ex, killed = _executor(monkeypatch, error)
    [event] = ex._poll_attempts()
    assert isinstance(event, Finished) and event.outcome is AttemptOutcome.LOST
    assert type(error).__name__ in event.error
    assert ex._active == {} and len(killed) == 1 and ex._next_sweep == 0.0  # swept at the next poll


def test_other_poll_errors_are_retried_not_raised(monkeypatch):
    ex, killed = _executor(monkeypatch, rx.RaySystemError("transient"))
    assert ex._poll_attempts() == [] and ("j-1", 1) in ex._active and killed == []

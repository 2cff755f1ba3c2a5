"""When GPUs of each type become available: the schedule of running jobs' expected ends, and the
availability profile HAS builds on it within one scheduling call."""

from __future__ import annotations

from bisect import insort

from frenzy.sched.pool import FreePool
from frenzy.sched.types import ClusterState


class Releases:
    """When running jobs free GPUs of each type: sorted expected end times, the GPUs each frees and
    on which nodes."""

    def __init__(self, state: ClusterState):
        by_type: dict[str, list[tuple]] = {}
        for job in state.running:
            if job.expected_end_s is not None:
                by_type.setdefault(job.choice.gpu.name, []).append(
                    (job.expected_end_s, job.choice.num_gpus, job.allocation))
        self.ends: dict[str, list[float]] = {}
        self.gpus: dict[str, list[int]] = {}
        self.allocations: dict[str, list[tuple]] = {}
        for gpu, items in by_type.items():
            items.sort()
            self.ends[gpu] = [t for t, _, _ in items]
            self.gpus[gpu] = [n for _, n, _ in items]
            self.allocations[gpu] = [a for _, _, a in items]


class Profile:
    """When GPUs of each type become available, as the call goes: the GPUs free now, those running
    jobs release at their expected ends, and the jobs this call places or plans to wait for, each
    taking the earliest GPUs and giving them back when it ends (the availability profile of
    conservative backfilling, Mu'alem & Feitelson 2001). A job behind a queue of short jobs then
    expects them to cycle through the GPUs rather than to hold them all at once."""

    def __init__(self, releases: Releases, pool: FreePool, now: float):
        self.releases, self.pool, self.now = releases, pool, now
        self.steps: dict[str, list[list]] = {}  # per type: sorted [time, GPUs becoming available]

    def _of(self, gpu: str) -> list[list]:
        steps = self.steps.get(gpu)
        if steps is None:
            ends, gpus = self.releases.ends.get(gpu, ()), self.releases.gpus.get(gpu, ())
            steps = self.steps[gpu] = [[self.now, self.pool.totals.get(gpu, 0)]] + [[t, n] for t, n in zip(ends, gpus)]
        return steps

    def time_free(self, gpu: str, need: int) -> float | None:
        """Earliest time `need` GPUs of this type are available (None: the type has fewer)."""
        seen = 0
        for t, n in self._of(gpu):
            seen += n
            if seen >= need:
                return max(t, self.now)
        return None

    def available_at(self, gpu: str, t: float) -> int:
        """GPUs of this type available at time `t` and not yet taken."""
        return sum(n for when, n in self._of(gpu) if when <= t)

    def take(self, gpu: str, need: int, until: float) -> None:
        """`need` of the earliest GPUs of this type are busy until `until`."""
        steps = self._of(gpu)
        left = need
        while left > 0 and steps:
            used = min(left, steps[0][1])
            steps[0][1] -= used
            left -= used
            if steps[0][1] == 0:
                steps.pop(0)
        insort(steps, [until, need])


_LAST_RELEASES: list = [None, None]


def releases_of(state: ClusterState) -> Releases:
    """The release schedule of `state.running`, reused while the caller passes the same tuple."""
    if _LAST_RELEASES[0] is not state.running:
        _LAST_RELEASES[0], _LAST_RELEASES[1] = state.running, Releases(state)
    return _LAST_RELEASES[1]

"""When GPUs of each type become available: the schedule of running jobs' expected ends, and the
availability profile HAS builds on it within one scheduling call."""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort

from frenzy.sched.pool import FreePool
from frenzy.sched.types import ClusterState


class Releases:
    """When running jobs free GPUs of each type: sorted expected end times, the GPUs each frees and
    on which nodes, for each type some running job with an expected end holds (in no set order)."""

    def __init__(self, state: ClusterState):
        """Per type, the sorted (end, GPUs, allocation) of `state.running`'s jobs with an expected
        end (`items`), and each column of those as a list."""
        items: dict[str, list[tuple]] = {}
        for job in state.running:
            if job.expected_end_s is not None:
                items.setdefault(job.choice.gpu.name, []).append(_item(job))
        for listed in items.values():
            listed.sort()
        self._set(items, {gpu: [t for t, _, _ in listed] for gpu, listed in items.items()},
                  {gpu: [n for _, n, _ in listed] for gpu, listed in items.items()},
                  {gpu: [a for _, _, a in listed] for gpu, listed in items.items()})

    @classmethod
    def of_columns(cls, items: dict, ends: dict, gpus: dict, allocations: dict) -> Releases:
        """A schedule from the four per-type lists as `_updated` keeps them."""
        releases = cls.__new__(cls)
        releases._set(items, ends, gpus, allocations)
        return releases

    def _set(self, items: dict, ends: dict, gpus: dict, allocations: dict) -> None:
        self.items, self.ends, self.gpus, self.allocations = items, ends, gpus, allocations


def _item(job) -> tuple:
    return job.expected_end_s, job.choice.num_gpus, job.allocation


def _updated(last: Releases, last_running: tuple, state: ClusterState) -> Releases | None:
    """`last` (of `last_running`) brought up to `state.running` by inserting the jobs that started
    and removing those that stopped, the same lists a rebuild sorts; None where most jobs changed
    (a rebuild is then as cheap). Only the changed types' lists are new: the others are shared
    with `last`, and no list is changed once built."""
    running, changes = state.running, state.changes
    if changes is not None and changes.previous is last_running:  # the caller says what changed
        started, stopped = {id(job) for job in changes.started}, {id(job) for job in changes.stopped}
        added = [job for job in changes.started if id(job) not in stopped]
        removed = [job for job in changes.stopped if id(job) not in started]
    else:
        now_by_id, was_by_id = dict(zip(map(id, running), running)), dict(zip(map(id, last_running), last_running))
        added = [now_by_id[key] for key in now_by_id.keys() - was_by_id.keys()]
        removed = [was_by_id[key] for key in was_by_id.keys() - now_by_id.keys()]
    added = [job for job in added if job.expected_end_s is not None]  # the order of insertion is immaterial
    removed = [job for job in removed if job.expected_end_s is not None]
    if 2 * (len(added) + len(removed)) > len(running):
        return None
    # the four lists of a changed type are copied, then changed at the same index
    lists = [dict(last.items), dict(last.ends), dict(last.gpus), dict(last.allocations)]
    copied: set[str] = set()
    for job, add in [(j, False) for j in removed] + [(j, True) for j in added]:
        gpu = job.choice.gpu.name
        if gpu not in copied:
            for by_type in lists:
                by_type[gpu] = list(by_type.get(gpu, ()))
            copied.add(gpu)
        item = _item(job)
        if add:
            at = bisect_right(lists[0][gpu], item)
            for by_type, value in zip(lists, (item, *item)):
                by_type[gpu].insert(at, value)
        else:
            at = bisect_left(lists[0][gpu], item)
            for by_type in lists:
                del by_type[gpu][at]
    for gpu in copied:
        if not lists[0][gpu]:
            for by_type in lists:
                del by_type[gpu]
    return Releases.of_columns(*lists)


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
    """The release schedule of `state.running`, reused while the caller passes the same tuple and
    updated, not rebuilt, when a few jobs started or stopped since the last tuple."""
    last_running, last = _LAST_RELEASES
    if last_running is not state.running:
        updated = None if last is None else _updated(last, last_running, state)
        _LAST_RELEASES[0], _LAST_RELEASES[1] = state.running, updated or Releases(state)
    return _LAST_RELEASES[1]

"""What a scheduling call reads about each running job that stays the same while the job runs:
its predicted seconds per step on its plan and on its fastest plan, its usable plans, its GPU type
and whether it buys time.

HAS scans the running jobs several times per call (re-queue of slow runners, elastic resizing);
on a cluster with hundreds of running jobs and a call on every arrival and completion, looking
these up again per job and per scan was most of a call's cost. They are kept across calls instead,
patched with the jobs that started and stopped since the last call where the caller says which
(`ClusterState.changes`), so a call pays only for what changed. Each scan keeps its own list of the
jobs it may act on (`subset`), from which it drops for good a job that time has ruled out (its
remaining time too short for any move to pay), so it stops re-examining jobs about to end.
"""

from __future__ import annotations

from operator import is_
from typing import Callable

from frenzy.sched.types import ClusterState, QueuedJob, RunningJob


class RunFact:
    """What stays the same about one running job while it runs: the job, its plan's predicted
    seconds per step and its fastest plan's, `options` (its usable plans as (plan, GPUs, seconds
    per step)), its GPU type and count, whether it buys time; `memo` holds what the scans derive
    from these (the moves they may offer it), also kept for the job's run. `steps_left` is set by
    a scan for the call it offers the job a move in."""

    __slots__ = ("run", "step_s", "fastest_s", "options", "gpu", "gpus", "buys_time", "steps_left", "memo")

    def __init__(self, run: RunningJob, step_s: float, fastest_s: float, options: list):
        self.run, self.step_s, self.fastest_s, self.options = run, step_s, fastest_s, options
        self.gpu, self.gpus, self.buys_time = run.choice.gpu.name, run.choice.num_gpus, run.job.buys_time
        self.steps_left = 0.0
        self.memo: dict = {}

    def slowdown_s(self, step_s: float) -> float:
        """Extra seconds to finish at `step_s` per step instead of the current plan's, restart excluded."""
        return self.steps_left * (step_s - self.step_s)


class RunFacts:
    """The RunFact of each running job, in order, that has its queued job, an expected end and a
    step time for its plan (`seconds_of(job)` maps id(plan) to seconds per step, "fastest" to the
    least; `options_of(job)` lists its usable plans)."""

    __slots__ = ("_seconds_of", "_options_of", "_running", "_runs", "facts", "_known", "_subsets")

    def __init__(self, seconds_of: Callable[[QueuedJob], dict], options_of: Callable[[QueuedJob], list]):
        self._seconds_of, self._options_of = seconds_of, options_of
        self._running: tuple | None = None  # the tuple last read
        self._runs: list[RunningJob] = []  # its jobs, facts or not, to check a patch against
        self.facts: list[RunFact] = []
        # by id(running job): (the job, its facts or None), for a rebuild; the entry keeps the job
        # referenced, so its id is never mistaken for another's
        self._known: dict[int, tuple] = {}
        self._subsets: dict = {}  # key -> [keep, facts kept, the latest `now` asked at]

    def read(self, state: ClusterState) -> list[RunFact]:
        """The facts of `state.running`'s jobs, in its order."""
        running = state.running
        if running is self._running:
            return self.facts
        changes = state.changes
        if not (changes is not None and self._running is not None and changes.previous is self._running
                and self._patched(changes, running)):
            self._rebuild(running)
        self._running = running
        return self.facts

    def subset(self, state: ClusterState, key, keep: Callable[[RunFact], bool], now: float) -> list[RunFact]:
        """The facts that pass `keep` (a test that holds or fails for a job's whole run), in order,
        as one list kept across calls under `key`. The caller may remove facts from it for good
        where a test that, once failed, fails at every later time rules them out; the list is
        rebuilt if `now` is earlier than at a past call."""
        facts = self.read(state)
        entry = self._subsets.get(key)
        if entry is None or now < entry[2]:
            entry = self._subsets[key] = [keep, [f for f in facts if keep(f)], now]
        entry[2] = now
        return entry[1]

    def _fact(self, run: RunningJob) -> RunFact | None:
        entry = self._known.get(id(run))
        if entry is None or entry[0] is not run:
            entry = self._known[id(run)] = (run, _facts(run, self._seconds_of, self._options_of))
        return entry[1]

    def _rebuild(self, running: tuple) -> None:
        facts = [fact for fact in map(self._fact, running) if fact is not None]
        if len(self._known) > 4 * len(running) + 256:  # forget jobs that stopped
            live = {id(run) for run in running}
            self._known = {key: entry for key, entry in self._known.items() if key in live}
        self._runs, self.facts = list(running), facts
        for entry in self._subsets.values():
            entry[1] = [f for f in facts if entry[0](f)]

    def _patched(self, changes, running: tuple) -> bool:
        """Bring the facts up to `running` from the jobs that started and stopped since the tuple
        last read (one in both started and stopped); False, with nothing changed, where the result
        would not be `running` in its order (a caller whose changes do not add up)."""
        stopped = {id(run) for run in changes.stopped}
        started = [run for run in changes.started if id(run) not in stopped]
        runs = ([run for run in self._runs if id(run) not in stopped] if stopped else self._runs) + started
        if len(runs) != len(running) or not all(map(is_, runs, running)):
            return False
        gone = set()  # the facts of the jobs that stopped
        for key in stopped:
            entry = self._known.pop(key, None)
            if entry is not None and entry[1] is not None:
                gone.add(entry[1])
        new = [fact for fact in map(self._fact, started) if fact is not None]
        self._runs = runs
        self.facts = _patch(self.facts, gone, new)
        for entry in self._subsets.values():
            entry[1] = _patch(entry[1], gone, [f for f in new if entry[0](f)])
        return True


def _patch(facts: list[RunFact], gone: set[RunFact], new: list[RunFact]) -> list[RunFact]:
    """`facts` without `gone`, then `new`; the list itself where nothing changes."""
    if gone and not gone.isdisjoint(facts):
        facts = [f for f in facts if f not in gone]
    return facts + new if new else facts


def _facts(run, seconds_of, options_of) -> RunFact | None:
    if run.job is None or run.expected_end_s is None:
        return None
    seconds = seconds_of(run.job)
    step = seconds.get(id(run.choice))
    if not step:
        return None
    return RunFact(run, step, seconds["fastest"], options_of(run.job))

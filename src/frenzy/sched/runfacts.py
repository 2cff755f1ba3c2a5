"""What a scheduling call reads about each running job that stays the same while the job runs:
its predicted seconds per step on its plan and on its fastest plan, its usable plans, its GPU type
and whether it buys time.

HAS scans the running jobs several times per call (re-queue of slow runners, elastic resizing);
on a cluster with hundreds of running jobs and a call on every arrival and completion, looking
these up again per job and per scan was most of a call's cost. They are kept across calls instead,
patched with the jobs that started and stopped since the last call where the caller says which
(`ClusterState.changes`), so a call pays only for what changed. Each scan keeps its own set of the
jobs it may act on (`subset`), from which it drops for good a job that time has ruled out (its
remaining time too short for any move to pay), so it stops re-examining jobs about to end.
"""

from __future__ import annotations

from operator import is_, itemgetter
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
    least; `options_of(job)` lists its usable plans). Facts are kept as the keys of ordered dicts,
    so a patch costs what changed, not what runs."""

    __slots__ = ("_seconds_of", "_options_of", "_running", "_runs", "_known", "facts", "_subsets")

    def __init__(self, seconds_of: Callable[[QueuedJob], dict], options_of: Callable[[QueuedJob], list]):
        self._seconds_of, self._options_of = seconds_of, options_of
        self._running: tuple | None = None  # the tuple last read
        # its jobs, facts or not, by id in order (to check a patch against); each keeps its job
        # referenced, so an id is never mistaken for another's
        self._runs: dict[int, tuple[RunningJob, RunFact | None]] = {}
        # the same for every job read since the last rebuild that forgot the stopped ones: a caller
        # that passes states not told apart by `changes` (several clusters, captured states) then
        # rebuilds from facts already made
        self._known: dict[int, tuple[RunningJob, RunFact | None]] = {}
        self.facts: dict[RunFact, None] = {}
        self._subsets: dict = {}  # key -> [keep, facts kept (dict), the latest `now` asked at]

    def read(self, state: ClusterState) -> dict[RunFact, None]:
        """The facts of `state.running`'s jobs, in its order (the keys)."""
        running = state.running
        if running is self._running:
            return self.facts
        changes = state.changes
        if not (changes is not None and self._running is not None and changes.previous is self._running
                and self._patched(changes, running)):
            self._rebuild(running)
        self._running = running
        return self.facts

    def subset(self, state: ClusterState, key, keep: Callable[[RunFact], bool], now: float) -> dict[RunFact, None]:
        """The facts that pass `keep` (a test that holds or fails for a job's whole run), in order
        (the keys), as one dict kept across calls under `key`. The caller may delete facts from it
        for good where a test that, once failed, fails at every later time rules them out; it is
        rebuilt if `now` is earlier than at a past call."""
        facts = self.read(state)
        entry = self._subsets.get(key)
        if entry is None or now < entry[2]:
            entry = self._subsets[key] = [keep, dict.fromkeys(f for f in facts if keep(f)), now]
        entry[2] = now
        return entry[1]

    def _rebuild(self, running: tuple) -> None:
        known, runs = self._known, {}
        for run in running:
            entry = known.get(id(run))
            if entry is None or entry[0] is not run:
                entry = known[id(run)] = (run, _facts(run, self._seconds_of, self._options_of))
            runs[id(run)] = entry
        if len(known) > 4 * len(running) + 256:  # forget jobs that stopped
            self._known = dict(runs)
        self._runs = runs
        self.facts = dict.fromkeys(fact for _, fact in self._runs.values() if fact is not None)
        self._subsets.clear()  # each rebuilt when next asked for: a call may not need them all

    def _patched(self, changes, running: tuple) -> bool:
        """Bring the facts up to `running` from the jobs that started and stopped since the tuple
        last read (one in both started and stopped); False, with nothing changed, where the result
        would not be `running` in its order (a caller whose changes do not add up)."""
        runs = dict(self._runs)
        stopped = {id(run) for run in changes.stopped}
        gone = []  # the facts of the jobs that stopped
        for run in changes.stopped:
            entry = runs.get(id(run))
            if entry is not None and entry[0] is run:
                del runs[id(run)]
                if entry[1] is not None:
                    gone.append(entry[1])
        new = []
        for run in changes.started:
            if id(run) not in stopped:
                fact = _facts(run, self._seconds_of, self._options_of)
                runs[id(run)] = (run, fact)
                if fact is not None:
                    new.append(fact)
        if len(runs) != len(running) or not all(map(is_, map(itemgetter(0), runs.values()), running)):
            return False
        self._runs = runs
        for run in changes.stopped:
            self._known.pop(id(run), None)
        self._known.update((id(fact.run), (fact.run, fact)) for fact in new)
        for facts in [self.facts] + [entry[1] for entry in self._subsets.values()]:
            for fact in gone:
                facts.pop(fact, None)
        for fact in new:
            self.facts[fact] = None
            for entry in self._subsets.values():
                if entry[0](fact):
                    entry[1][fact] = None
        return True


def _facts(run, seconds_of, options_of) -> RunFact | None:
    if run.job is None or run.expected_end_s is None:
        return None
    seconds = seconds_of(run.job)
    step = seconds.get(id(run.choice))
    if not step:
        return None
    return RunFact(run, step, seconds["fastest"], options_of(run.job))

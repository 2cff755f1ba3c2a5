"""What a scheduling call reads about each running job that stays the same while the job runs:
its predicted seconds per step on its plan and on its fastest plan, its usable plans, its GPU type
and whether it buys time.

HAS scans the running jobs several times per call (re-queue of slow runners, elastic resizing);
on a cluster with hundreds of running jobs and a call on every arrival and completion, looking
these up again per job and per scan was most of a call's cost. They are kept per running job
across calls instead, so a call pays only for the jobs that started since the last one.
"""

from __future__ import annotations

from typing import Callable

from frenzy.sched.types import QueuedJob

# Per (`seconds_of`, `options_of`): the running tuple last read, its facts, and the facts by
# id(running job).
_CACHES: dict[tuple, list] = {}


def run_facts(running: tuple, seconds_of: Callable[[QueuedJob], dict],
              options_of: Callable[[QueuedJob], list]) -> list[tuple]:
    """(running job, seconds per step of its plan, of its fastest plan, `options_of(its job)`, its
    GPU type, whether its job buys time) for each running job, in order, that has its queued job,
    an expected end and a step time for its plan (`seconds_of(job)` maps id(plan) to seconds per
    step, "fastest" to the least). The same tuple passed again gets the same list; entries are
    keyed by the job object, which they keep referenced, so an id is never mistaken for another's."""
    cache = _CACHES.get((seconds_of, options_of))
    if cache is None:
        cache = _CACHES[(seconds_of, options_of)] = [None, [], {}]
    if cache[0] is running:
        return cache[1]
    known: dict[int, tuple] = cache[2]
    facts = []
    for run in running:
        entry = known.get(id(run))
        if entry is None or entry[0] is not run:
            entry = known[id(run)] = (run, _facts(run, seconds_of, options_of))
        if entry[1] is not None:
            facts.append(entry[1])
    if len(known) > 4 * len(running) + 256:  # forget jobs that stopped
        live = {id(run) for run in running}
        cache[2] = {key: entry for key, entry in known.items() if key in live}
    cache[0], cache[1] = running, facts
    return facts


def _facts(run, seconds_of, options_of) -> tuple | None:
    if run.job is None or run.expected_end_s is None:
        return None
    seconds = seconds_of(run.job)
    step = seconds.get(id(run.choice))
    if not step:
        return None
    return run, step, seconds["fastest"], options_of(run.job), run.choice.gpu.name, run.job.buys_time

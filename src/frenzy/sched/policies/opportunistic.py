"""`opportunistic`: the user's requested GPU count on whichever free GPU type comes first.

Jobs are considered in queue order, but one that does not fit now does not block those behind it.
The GPU type is whatever has room first (cluster order), regardless of the job's memory needs.
"""

from __future__ import annotations

from typing import Sequence

from frenzy.sched.pool import FreePool
from frenzy.sched.registry import register
from frenzy.sched.requests import allowed_types, place_request, requested_gpus, type_order
from frenzy.sched.types import ClusterState, Decision, QueuedJob


@register("opportunistic")
class OpportunisticScheduler:
    name = "opportunistic"
    round_s = None

    def schedule(self, state: ClusterState, queue: Sequence[QueuedJob], now: float) -> list[Decision]:
        pool = FreePool(state)
        types = type_order(state)
        decisions: list[Decision] = []
        for job in queue:
            if max(pool.totals.values(), default=0) < requested_gpus(job):
                continue
            place = next((p for t in allowed_types(job, types) if (p := place_request(job, t, pool))), None)
            if place is not None:
                pool.take(place.choice.gpu.name, place.allocation)
                decisions.append(place)
        return decisions

"""`fifo`: the user's requested GPU count and type, strictly first come first served.

The head of the queue blocks everything behind it until its request fits (no backfilling). A job
with no requested type takes the first type, in cluster order, that has room.
"""

from __future__ import annotations

from typing import Sequence

from frenzy.sched.pool import FreePool
from frenzy.sched.registry import register
from frenzy.sched.requests import allowed_types, place_request, type_order
from frenzy.sched.types import ClusterState, Decision, QueuedJob


@register("fifo")
class FifoScheduler:
    name = "fifo"
    round_s = None

    def schedule(self, state: ClusterState, queue: Sequence[QueuedJob], now: float) -> list[Decision]:
        pool = FreePool(state)
        types = type_order(state)
        decisions: list[Decision] = []
        for job in queue:
            place = next((p for t in allowed_types(job, types) if (p := place_request(job, t, pool))), None)
            if place is None:
                break  # strict FIFO: nobody overtakes the head
            pool.take(place.choice.gpu.name, place.allocation)
            decisions.append(place)
        return decisions

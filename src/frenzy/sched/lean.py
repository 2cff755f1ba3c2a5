"""When HAS may spend GPU-seconds beyond a job's leanest plan of a GPU type.

A job's plans of one type are data-parallel scale-outs of the same layout (frenzy.sched.scaleout):
the wider one finishes sooner but, scaling below linear, takes more GPU-seconds for the same steps.
Those extra GPU-seconds are the queue's loss wherever a job behind could have run on the extra
GPUs (at its own leanest plan, which wastes none). So a wider plan is taken only into GPUs of its
type that nobody left in the queue can use: the type's free GPUs beyond the fewest each job behind
needs there. Where the queue would use them, the job takes its leanest plan of that type (or a
narrower one that costs no more GPU-seconds) and the GPUs go to the others. No constant: the bar
is the job's own leanest plan and the queue's own demand. The rule holds only where a job kept to
its leanest plan can widen later, by growth into GPUs that free (frenzy.sched.elastic): without
growth it only lengthens runs. On bench/sim_generalise.py's first 8 design runs (--quick; mean cut
vs sia), HAS without elastic resizing: 23.2% with the rule, 28.5% without; plain HAS (not time-aware,
so neither growth nor preemption): -51.6% with it, -35.0% without. HAS applies it only with both.

On bench/sim_generalise.py's design half (56 runs; mean cut vs sia over the jobs both finished,
runs with p99 no worse than sia's, runs with GPU-hours within +5% of sia's, GPU-hours over all
runs; HAS as it then was, with a reservation for long-waiting jobs): without the rule 29.6%, 43,
22, 1.041x; with it 29.2%, 41, 24, 1.026x. Stricter variants
cost far more time than they saved GPU-hours: the same bar for preemption (a victim queues again,
so no GPU it frees is spare) 24.1%, 47, 24, 1.020x; never a wider plan at all 20.9%, 38, 22,
1.045x. Most of HAS's remaining excess is not this walk's width: on EF01 x alibaba-openb@256 at
load 1.0, HAS's useful GPU-hours were 1.17x what the leanest plans of the types it ran on would
take (sia's 1.00x), and still 1.16x with the walk held to lean plans and no elastic resizing; the
wider plans come from paths this rule does not cover (preemption, re-queue moves, the contended
head's assignment), not separated further.
"""

from __future__ import annotations

from typing import Callable, Sequence

from frenzy.memory.plans import PlanChoice
from frenzy.sched.pool import FreePool
from frenzy.sched.types import QueuedJob


def lean_by_type(plans: Sequence[PlanChoice], seconds: dict) -> dict[str, tuple[float, int]]:
    """Per GPU type of `plans`: (least GPU-seconds per step of any plan there, fewest GPUs of any
    plan there). `seconds`: seconds per step by id(plan)."""
    out: dict[str, tuple[float, int]] = {}
    for c in plans:
        gpu_s = seconds[id(c)] * c.num_gpus
        least, fewest = out.get(c.gpu.name, (gpu_s, c.num_gpus))
        out[c.gpu.name] = (min(least, gpu_s), min(fewest, c.num_gpus))
    return out


def fewest_by_type(by_type: dict[str, tuple[float, int]]) -> tuple[tuple[str, int], ...]:
    """(GPU type, fewest GPUs of any plan there) for each type of lean_by_type's `by_type`."""
    return tuple((gpu, fewest) for gpu, (_, fewest) in by_type.items())


def lean_plans(plans: Sequence[PlanChoice], seconds: dict, by_type: dict[str, tuple[float, int]]) -> frozenset:
    """The ids of the plans that cost no more GPU-seconds per step than the leanest of their type
    (`by_type`: lean_by_type's), which the rule always allows. `seconds`: seconds per step by id(plan)."""
    return frozenset(id(c) for c in plans if seconds[id(c)] * c.num_gpus <= by_type[c.gpu.name][0] * (1.0 + 1e-9))


class QueueDemand:
    """GPUs per type the jobs not yet handled in one scheduling call need at the least (each job's
    fewest GPUs on every type it has a plan for: a job that can use two types counts on both, so no
    type's spare GPUs are overstated)."""

    __slots__ = ("needs", "_fewest")

    def __init__(self, queue: Sequence[QueuedJob], fewest_of: Callable[[QueuedJob], tuple]):
        """`fewest_of(job)`: (GPU type, fewest GPUs of any of the job's plans there) pairs, as
        fewest_by_type gives them."""
        self._fewest = fewest_of
        needs: dict[str, int] = {}
        for job in queue:
            for gpu, fewest in fewest_of(job):
                needs[gpu] = needs.get(gpu, 0) + fewest
        self.needs = needs

    def leave(self, job: QueuedJob) -> None:
        """`job` is handled (placed or left waiting): it no longer counts as demand."""
        needs = self.needs
        for gpu, fewest in self._fewest(job):
            needs[gpu] -= fewest

    def allows(self, choice: PlanChoice, lean: frozenset, pool: FreePool) -> bool:
        """Whether a job (already left) may take `choice`: it is one of the job's `lean` plans
        (lean_plans), or the GPUs it takes beyond those are free GPUs no job still in the queue
        needs."""
        if id(choice) in lean:
            return True
        gpu = choice.gpu.name
        return choice.num_gpus + self.needs.get(gpu, 0) <= pool.totals.get(gpu, 0)

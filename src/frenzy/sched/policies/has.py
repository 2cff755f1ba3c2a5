"""HAS, Frenzy's heterogeneity-aware scheduler: for each queued job in order, walk its MARP plans in
priority order and place the first one the cluster can satisfy now (best-fit nodes).

Cost per job is O(plans x nodes of the plan's type); no solver, no rounds.
"""

from __future__ import annotations

from typing import Sequence

from frenzy.sched.placement import place_on_nodes
from frenzy.sched.registry import register
from frenzy.sched.types import ClusterState, Decision, NodeState, Place, QueuedJob, Wait


def _take(nodes: dict[str, NodeState], allocation) -> None:
    for name, gpus in allocation:
        node = nodes[name]
        nodes[name] = NodeState(name=node.name, gpu_type=node.gpu_type, total_gpus=node.total_gpus,
                                free_gpus=node.free_gpus - gpus)


def first_satisfiable(job: QueuedJob, nodes: dict[str, NodeState]) -> Place | None:
    by_type: dict[str, list[NodeState]] = {}
    for node in nodes.values():
        if node.free_gpus:
            by_type.setdefault(node.gpu_type, []).append(node)
    for choice in job.plans:
        candidates = by_type.get(choice.gpu.name)
        if not candidates:
            continue
        allocation = place_on_nodes(candidates, choice.num_gpus, choice.plan.tp)
        if allocation is not None:
            return Place(job_id=job.job_id, choice=choice, allocation=allocation)
    return None


@register("frenzy")
class HeterogeneityAwareScheduler:
    name = "frenzy"

    def schedule(self, state: ClusterState, queue: Sequence[QueuedJob], now: float) -> list[Decision]:
        nodes = {n.name: n for n in state.nodes}
        decisions: list[Decision] = []
        for job in queue:
            place = first_satisfiable(job, nodes)
            if place is None:
                decisions.append(Wait(job_id=job.job_id, reason="no plan fits the free GPUs now"))
                continue
            _take(nodes, place.allocation)
            decisions.append(place)
        return decisions

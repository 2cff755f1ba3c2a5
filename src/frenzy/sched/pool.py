"""A mutable view of free GPUs for the duration of one `schedule` call.

Policies are pure functions of (state, queue, now); inside one call they need to take GPUs as they
decide, so they work on this scratch copy, never on the ClusterState they were given.
"""

from __future__ import annotations

from frenzy.sched.placement import best_fit
from frenzy.sched.types import ClusterState, RunningJob


_LAST: list = [None, None]  # [the nodes tuple last read, what was read from it]


def _read(nodes) -> tuple:
    """Free GPUs per type and node, totals, capacity, widest node and slowest inter-node link per
    type. A caller that passes the very same nodes tuple again (the simulator between events that
    free nothing) gets the previous reading; the tuple is kept referenced, so its id cannot be
    recycled meanwhile."""
    if _LAST[0] is nodes:
        return _LAST[1]
    free: dict[str, dict[str, int]] = {}
    totals: dict[str, int] = {}
    widest: dict[str, int] = {}
    capacity: dict[str, int] = {}
    links: dict[str, float] = {}
    for node in nodes:
        t = node.gpu_type
        if t not in free:
            free[t], totals[t], widest[t], capacity[t], links[t] = {}, 0, 0, 0, node.inter_node_bandwidth_bytes_s
        free[t][node.name] = node.free_gpus
        totals[t] += node.free_gpus
        capacity[t] += node.total_gpus
        if node.total_gpus > widest[t]:
            widest[t] = node.total_gpus
        links[t] = min(links[t], node.inter_node_bandwidth_bytes_s)
    _LAST[0], _LAST[1] = nodes, (free, totals, widest, capacity, links)
    return _LAST[1]


class FreePool:
    """Free GPUs per node, grouped by GPU type, with per-type totals for O(1) rejections."""

    __slots__ = ("free", "totals", "widest", "capacity", "links")

    def __init__(self, state: ClusterState):
        free, totals, widest, capacity, links = _read(state.nodes)
        self.free = {t: nodes.copy() for t, nodes in free.items()}
        self.totals = dict(totals)
        self.widest, self.capacity, self.links = widest, capacity, links  # read-only

    def fewest_nodes(self, gpu_type: str, gpus: int) -> int:
        """Nodes a plan of `gpus` GPUs of this type spans at the least (on its widest nodes)."""
        return -(-gpus // self.widest[gpu_type])

    def fits_total(self, gpu_type: str, gpus: int) -> bool:
        return self.totals.get(gpu_type, 0) >= gpus

    def find(self, gpu_type: str, gpus: int, group: int) -> tuple[tuple[str, int], ...] | None:
        """Best-fit nodes for `gpus` GPUs in whole groups of `group`, or None (nothing is taken)."""
        if self.totals.get(gpu_type, 0) < gpus:
            return None
        return best_fit(self.free[gpu_type], gpus, group)

    def take(self, gpu_type: str, allocation) -> None:
        nodes = self.free[gpu_type]
        for name, gpus in allocation:
            if nodes[name] < gpus:
                raise ValueError(f"node {name} has {nodes[name]} free GPUs, cannot take {gpus}")
            nodes[name] -= gpus
            self.totals[gpu_type] -= gpus

    def give(self, gpu_type: str, allocation) -> None:
        nodes = self.free[gpu_type]
        for name, gpus in allocation:
            nodes[name] += gpus
            self.totals[gpu_type] += gpus

    def release(self, job: RunningJob) -> None:
        self.give(job.choice.gpu.name, job.allocation)

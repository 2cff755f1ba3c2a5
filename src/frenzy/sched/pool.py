"""A mutable view of free GPUs for the duration of one `schedule` call.

Policies are pure functions of (state, queue, now); inside one call they need to take GPUs as they
decide, so they work on this scratch copy, never on the ClusterState they were given.
"""

from __future__ import annotations

from itertools import compress
from operator import is_not

from frenzy.sched.placement import best_fit
from frenzy.sched.types import ClusterState, RunningJob


# [the nodes tuple last read, what was read from it, whether its node names are all distinct]
_LAST: list = [None, None, False]


def _read(nodes) -> tuple:
    """Free GPUs per type and node, totals, capacity, widest node and slowest inter-node link per
    type. A caller that passes the very same nodes tuple again (the simulator between events that
    free nothing) gets the previous reading; one that passes a tuple differing from the last only
    in some nodes' free counts (the simulator after a placement or a release) gets the previous
    reading patched at those nodes, not rebuilt. The tuple is kept referenced, so its id cannot be
    recycled meanwhile."""
    last, reading, distinct = _LAST
    if last is nodes:
        return reading
    # A reading keeps one free count per node name: patching one of two nodes of the same name
    # could differ from a rebuild, so such a list is always rebuilt.
    if last is None or not distinct or not _patch(reading, last, nodes):
        reading = _build(nodes)
        distinct = len({node.name for node in nodes}) == len(nodes)
    _LAST[0], _LAST[1], _LAST[2] = nodes, reading, distinct
    return reading


def _patch(reading: tuple, last, nodes) -> bool:
    """Update `reading` (of `last`) to read `nodes`; False, with nothing changed, where they differ in
    more than free counts (another node list: the caller rebuilds). A changed type's free GPUs per
    node are a new dict, never the one changed in place: pools made from the last reading (in this
    call, or a policy wrapping another) share those until they change them."""
    if len(last) != len(nodes):
        return False
    changed = [(last[i], nodes[i]) for i in compress(range(len(nodes)), map(is_not, last, nodes))]
    for old, new in changed:
        if new.name != old.name or new.gpu_type != old.gpu_type or new.total_gpus != old.total_gpus or \
                new.inter_node_bandwidth_bytes_s != old.inter_node_bandwidth_bytes_s:
            return False
    free, totals = reading[0], reading[1]
    for gpu_type in {new.gpu_type for _, new in changed}:
        free[gpu_type] = free[gpu_type].copy()
    for old, new in changed:
        free[new.gpu_type][new.name] = new.free_gpus
        totals[new.gpu_type] += new.free_gpus - old.free_gpus
    return True


def _build(nodes) -> tuple:
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
    return free, totals, widest, capacity, links


class FreePool:
    """Free GPUs per node, grouped by GPU type, with per-type totals for O(1) rejections."""

    __slots__ = ("free", "totals", "widest", "capacity", "links", "_own")

    def __init__(self, state: ClusterState):
        free, totals, widest, capacity, links = _read(state.nodes)
        # A type's free GPUs per node are copied when this pool first changes them: most calls take
        # or give GPUs of few types, and the reading they come from is patched for the next call.
        self.free = dict(free)
        self._own: set[str] = set()
        self.totals = dict(totals)
        self.widest, self.capacity, self.links = widest, capacity, links  # read-only

    def _nodes(self, gpu_type: str) -> dict[str, int]:
        """This pool's own free GPUs per node of the type, to change."""
        if gpu_type not in self._own:
            self.free[gpu_type] = self.free[gpu_type].copy()
            self._own.add(gpu_type)
        return self.free[gpu_type]

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
        nodes = self._nodes(gpu_type)
        for name, gpus in allocation:
            if nodes[name] < gpus:
                raise ValueError(f"node {name} has {nodes[name]} free GPUs, cannot take {gpus}")
            nodes[name] -= gpus
            self.totals[gpu_type] -= gpus

    def give(self, gpu_type: str, allocation) -> None:
        nodes = self._nodes(gpu_type)
        for name, gpus in allocation:
            nodes[name] += gpus
            self.totals[gpu_type] += gpus

    def release(self, job: RunningJob) -> None:
        self.give(job.choice.gpu.name, job.allocation)

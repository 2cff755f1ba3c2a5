"""Best-fit placement of a plan's GPUs onto nodes of one GPU type.

Tensor-parallel groups never span nodes (their all-reduces need the intra-node link); among the
ways to place a plan, take the fewest nodes and leave the least unusable leftover.
"""

from __future__ import annotations

from frenzy.sched.types import NodeState


def best_fit(free: dict[str, int], gpus: int, group: int) -> tuple[tuple[str, int], ...] | None:
    """(node, GPUs) pairs giving `gpus` GPUs in whole groups of `group` from `free` (node -> free GPUs).

    One node if any can hold the plan: the one left with the least room (best fit). Otherwise the
    nodes with the most usable room first (fewest nodes), the last one best-fit. None if it cannot fit.
    """
    best_single: tuple[int, str] | None = None
    usable: list[tuple[int, str]] = []
    total = 0
    for name, n in free.items():
        u = n - n % group
        if u <= 0:
            continue
        total += u
        if u >= gpus and (best_single is None or (u - gpus, name) < best_single):
            best_single = (u - gpus, name)
        usable.append((u, name))
    if best_single is not None:
        return ((best_single[1], gpus),)
    if total < gpus:
        return None
    usable.sort(key=lambda x: (-x[0], x[1]))
    allocation, remaining, k = [], gpus, 0
    while remaining > 0:
        u, name = usable[k]
        k += 1
        if u >= remaining:  # the last node: the one that fits the remainder most tightly
            fitting = [(v - remaining, m) for v, m in usable[k - 1:] if v >= remaining]
            _, name = min(fitting)
            allocation.append((name, remaining))
            break
        allocation.append((name, u))
        remaining -= u
    return tuple(allocation)


def place_on_nodes(nodes: list[NodeState], gpus: int, group: int) -> tuple[tuple[str, int], ...] | None:
    """Choose (node, GPUs) pairs giving `gpus` GPUs in whole tensor-parallel groups of `group`.

    Returns None when the free GPUs of these nodes cannot hold the plan.
    """
    return best_fit({n.name: n.free_gpus for n in nodes}, gpus, group)

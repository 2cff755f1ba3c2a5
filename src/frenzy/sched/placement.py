"""Best-fit placement of a plan's GPUs onto nodes of one GPU type.

Tensor-parallel groups never span nodes (their all-reduces need the intra-node link); among the
ways to place a plan, take the fewest nodes and leave the least unusable leftover.
"""

from __future__ import annotations

from frenzy.sched.types import NodeState


def place_on_nodes(nodes: list[NodeState], gpus: int, group: int) -> tuple[tuple[str, int], ...] | None:
    """Choose (node, GPUs) pairs giving `gpus` GPUs in whole tensor-parallel groups of `group`.

    Returns None when the free GPUs of these nodes cannot hold the plan.
    """
    usable = [(n.free_gpus - n.free_gpus % group, n) for n in nodes]
    usable = [(u, n) for u, n in usable if u > 0]
    if sum(u for u, _ in usable) < gpus:
        return None
    # One node that fits: the one with the least room left over (best fit).
    single = [(u - gpus, n.name) for u, n in usable if u >= gpus]
    if single:
        _, name = min(single)
        return ((name, gpus),)
    # Otherwise fill the fullest-free nodes first (fewest nodes), then best-fit the remainder.
    allocation = []
    remaining = gpus
    for u, n in sorted(usable, key=lambda x: (-x[0], x[1].name)):
        if remaining == 0:
            break
        take = min(u, remaining)
        allocation.append((n.name, take))
        remaining -= take
    return tuple(allocation)

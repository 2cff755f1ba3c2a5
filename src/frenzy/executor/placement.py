"""The placement group that holds an attempt's GPUs, and how to give it back at once.

Ray Train creates the worker group's placement group inside its controller, so the group's
creator is the controller and its job is the server's. Killing the attempt runner kills the
controller, but Ray removes such a group only when the creator job ends too; until then only Ray
Train's detached PlacementGroupCleaner frees it, and that cleaner needs the state API (no
dashboard, as on a fake cluster: never) and knows the group only after the workers have started.
So rank 0 tells the attempt runner which group it runs in, and cancelling removes that group.
"""

from __future__ import annotations

import logging
import time

import ray
from ray.util.placement_group import (
    PlacementGroup,
    placement_group_table,
    remove_placement_group,
)

from frenzy.executor.resources import NAMESPACE

log = logging.getLogger(__name__)
# How long a release waits for Ray to mark the group removed (it answers in milliseconds).
RELEASE_WAIT_S = 5.0


def train_after_reporting_placement_group(config: dict) -> None:
    """Ray Train's per-worker function: rank 0 first hands its placement group to the attempt
    runner (which removes it right away if the attempt was cancelled meanwhile), then trains."""
    import ray.train

    from frenzy.executor.runner import actor_name
    from frenzy.train.worker import train_loop

    group = ray.util.get_current_placement_group()
    if group is not None and ray.train.get_context().get_world_rank() == 0:
        runner = ray.get_actor(actor_name(config["job_id"], config["attempt"]), namespace=NAMESPACE)
        ray.get(runner.hold_placement_group.remote(group.id.hex()))
    train_loop(config)


def release(group_id: str, wait_s: float = RELEASE_WAIT_S) -> bool:
    """Remove the placement group (hex id) and wait until Ray reports it removed; True if it is.
    Removing a group that is already gone is harmless. Never raises: a release that fails leaves
    the group to Ray Train's cleaner, and must not keep a cancel or a finished attempt from being
    recorded."""
    group = PlacementGroup(ray.PlacementGroupID.from_hex(group_id))
    try:
        if not is_removed(group):
            remove_placement_group(group)
        deadline = time.monotonic() + wait_s
        while not is_removed(group):
            if time.monotonic() > deadline:
                log.warning("placement group %s not removed after %.0f s", group_id, wait_s)
                return False
            time.sleep(0.02)
    except Exception:  # any Ray error: see the docstring
        log.exception("could not remove placement group %s", group_id)
        return False
    return True


def is_removed(group: PlacementGroup) -> bool:
    entry = placement_group_table(group)
    return entry.get("state", "REMOVED") == "REMOVED"


# ---- groups nobody will remove --------------------------------------------------------------
# Ray removes a (non-detached) group once both its creator actor and its creator job are dead.
# An attempt's group is created by its Ray Train controller, an actor of the server's job, which
# lives as long as the server: a controller that died (runner killed by a cancel during start-up,
# runner or node lost) leaves its group holding GPUs for as long as the server runs. `orphans()`
# finds exactly those - created by an actor (not a driver, so a group someone holds on purpose is
# never touched), that actor dead, asking for Frenzy GPUs - and `sweep()` removes them.


def orphans() -> list[str]:
    """Hex ids of groups that hold or wait for Frenzy GPUs and whose creator actor is dead."""
    from ray._private.state import state
    from ray.core.generated import gcs_pb2

    from frenzy.executor.resources import RESOURCE_PREFIX

    removed = gcs_pb2.PlacementGroupTableData.REMOVED
    out = []
    # The GCS table itself (the public placement_group_table() drops the creator fields).
    for raw in state._connect_and_get_accessor().get_placement_group_table():
        group = gcs_pb2.PlacementGroupTableData.FromString(raw)
        if group.state == removed or group.is_detached or not group.creator_actor_dead:
            continue
        if not group.creator_actor_id or ray.ActorID(group.creator_actor_id).is_nil():
            continue  # created by a driver: the driver's to remove
        if any(name.startswith(RESOURCE_PREFIX) for b in group.bundles for name in b.unit_resources):
            out.append(group.placement_group_id.hex())
    return out


def sweep() -> list[str]:
    """Remove every orphaned group (see `orphans`); the ids removed. Never raises."""
    try:
        found = orphans()
    except Exception:  # a Ray without these private fields: leave it to Ray Train's cleaner
        log.exception("could not list placement groups")
        return []
    removed = [g for g in found if release(g, wait_s=1.0)]
    if removed:
        log.warning("removed %d placement group(s) whose Ray Train controller had died: %s",
                    len(removed), removed)
    return removed

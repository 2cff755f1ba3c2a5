"""Which placement groups the sweep removes, on the GCS's own table rows (protobuf): only groups
asking for Frenzy GPUs whose creator actor (a Ray Train controller) is dead - never a driver's group,
a detached one, one already removed, or one whose creator lives."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray", reason="needs the ray extra (make test installs it)")

from ray.core.generated import gcs_pb2  # noqa: E402

from frenzy.executor import placement  # noqa: E402

ACTOR = bytes.fromhex("2f46fe74faed47fb21572be201000000")
NIL_ACTOR = b"\xff" * 16  # ray.ActorID.nil()


def row(n: int, *, resource="gpu_type:A10G-24G", creator=ACTOR, creator_dead=True, detached=False,
        state=gcs_pb2.PlacementGroupTableData.CREATED) -> bytes:
    group = gcs_pb2.PlacementGroupTableData(placement_group_id=bytes([n]) * 18, creator_actor_id=creator,
                                            creator_actor_dead=creator_dead, is_detached=detached, state=state)
    bundle = group.bundles.add()
    bundle.unit_resources[resource] = 1.0
    bundle.unit_resources["CPU"] = 1.0
    return group.SerializeToString()


def test_only_groups_of_dead_controllers_holding_frenzy_gpus_are_orphans(monkeypatch):
    rows = [row(1),  # a Train controller's group, controller dead: orphan
            row(2, state=gcs_pb2.PlacementGroupTableData.PENDING),  # still waiting for GPUs: orphan too
            row(3, creator_dead=False),  # the controller lives: its attempt runs
            row(4, creator=NIL_ACTOR),  # made by a driver (held outside Frenzy on purpose)
            row(5, detached=True),
            row(6, state=gcs_pb2.PlacementGroupTableData.REMOVED),
            row(7, resource="GPU")]  # not a Frenzy GPU

    class Accessor:
        def get_placement_group_table(self):
            return rows

    from ray._private import state

    monkeypatch.setattr(state.state, "_connect_and_get_accessor", lambda: Accessor())
    assert placement.orphans() == [(bytes([1]) * 18).hex(), (bytes([2]) * 18).hex()]
    assert ray.ActorID(NIL_ACTOR).is_nil()

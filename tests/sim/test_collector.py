"""The simulator's collector pacing leaves the collector as it found it and loses no garbage."""

import gc
import weakref

import pytest

from frenzy.sim.collector import YOUNG_COLLECTION_ALLOCATIONS, building, fewer_young_collections


class Node:
    pass


def _cycle_watched() -> weakref.ref:
    """A reference cycle only the cyclic collector can free, already unreachable; a weak reference
    to one of its objects tells whether it was freed."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


@pytest.fixture(autouse=True)
def collector_restored():
    was_on = gc.isenabled()
    thresholds = gc.get_threshold()
    yield
    gc.set_threshold(*thresholds)
    (gc.enable if was_on else gc.disable)()


def test_building_pauses_collection_and_restores_it():
    gc.enable()
    with building():
        assert not gc.isenabled()
        with building():  # nested: the inner exit must not turn it back on
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_building_leaves_a_disabled_collector_disabled_even_on_error():
    gc.disable()
    with pytest.raises(RuntimeError):
        with building():
            raise RuntimeError("a trace that does not parse")
    assert not gc.isenabled()


def test_young_collections_are_rarer_inside_and_as_before_after():
    before = gc.get_threshold()
    with fewer_young_collections():
        inside = gc.get_threshold()
        assert inside[0] >= YOUNG_COLLECTION_ALLOCATIONS and inside[1:] == before[1:]
    assert gc.get_threshold() == before


def test_a_process_with_rarer_collections_keeps_them():
    gc.set_threshold(10 * YOUNG_COLLECTION_ALLOCATIONS, 10, 10)
    with fewer_young_collections():
        assert gc.get_threshold()[0] == 10 * YOUNG_COLLECTION_ALLOCATIONS


def _allocate_past_young_threshold() -> list:
    """More live container objects than a young collection waits for, so one runs on its own."""
    return [[] for _ in range(3 * max(gc.get_threshold()[0], YOUNG_COLLECTION_ALLOCATIONS))]


def test_cycles_made_inside_are_freed_without_an_explicit_collection():
    gc.enable()
    with fewer_young_collections():
        watched = _cycle_watched()
        kept = _allocate_past_young_threshold()
        assert watched() is None
    del kept


def test_cycles_made_while_building_are_freed_once_it_ends():
    gc.enable()
    with building():
        watched = _cycle_watched()
        kept = _allocate_past_young_threshold()
        assert watched() is not None  # no collection while building
    kept += _allocate_past_young_threshold()
    assert watched() is None

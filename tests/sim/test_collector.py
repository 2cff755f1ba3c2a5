"""The simulator's collector pacing leaves the collector as it found it and loses no garbage."""

import gc
import weakref

import pytest

from frenzy.sim.collector import building, inputs_kept


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
    yield
    gc.unfreeze()
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


def test_garbage_frozen_with_the_inputs_is_freed_after_the_run():
    gc.collect()
    watched = _cycle_watched()
    with inputs_kept():
        assert gc.get_freeze_count() > 0
        gc.collect()
        assert watched() is not None  # frozen: the run's collections do not walk it
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert watched() is None


def test_an_existing_freeze_is_left_alone():
    gc.freeze()
    frozen = gc.get_freeze_count()
    with inputs_kept():
        pass
    assert gc.get_freeze_count() == frozen

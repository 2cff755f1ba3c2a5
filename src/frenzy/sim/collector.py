"""Pacing CPython's cyclic garbage collector for the simulator's two kinds of work.

By default the collector runs a young collection after every 700 container objects allocated, and
full passes that walk every object still alive. Building a trace's jobs allocates hundreds of
thousands of objects that all stay alive, so those collections find nothing, over and over; the
event loop then allocates millions of short-lived objects. Measured on bench/sim_speed.py's 111,096
jobs (the collector's own CPU time, from gc.callbacks): loading the trace 0.49 s and admitting its
jobs 1.16 s, both about 0.1 s with no collection; the event loop 2.5-3.0 s, and 0.8-1.3 s with young
collections every 10,000 allocations, the same at 50,000 and 100,000 (so the value is not a tuned
one: any young generation this much larger than the default gives it). Neither helper changes what
is computed, only when unreachable objects are reclaimed.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager

YOUNG_COLLECTION_ALLOCATIONS = 10_000  # at most this many unreclaimed young objects: a few MB


@contextmanager
def building():
    """No collection while building objects that all stay alive (a trace's jobs). The collector is
    turned back on only by the caller that turned it off, so nested or concurrent uses end with it
    as it was before the first."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


@contextmanager
def fewer_young_collections():
    """Young collections every YOUNG_COLLECTION_ALLOCATIONS allocations (never less often than the
    process already has them) for the event loop; the thresholds found are put back on exit."""
    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], YOUNG_COLLECTION_ALLOCATIONS), *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)

"""Pacing CPython's cyclic garbage collector for the simulator's two kinds of work.

The collector runs after every few hundred container objects allocated, and each of its full passes
walks every object still alive. Building a trace's jobs allocates hundreds of thousands of objects
that all stay alive, so those passes find nothing, over and over, in a heap that keeps growing; the
event loop then allocates millions of short-lived objects next to that large, unchanging heap. On
bench/sim_speed.py's 111,096 jobs the collector took about 1 s of loading and admitting (6.4 s with
it, 5.2 s without) and about 3% of the simulation (docs/BENCHMARKS.md#sim-speed). Neither helper
changes what is computed, only when unreachable objects are reclaimed.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager


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
def inputs_kept():
    """Everything alive on entry (the jobs, their plans) is left out of the collector's passes until
    exit, when it becomes collectable again: the event loop's collections then walk only what the
    loop itself allocated. Where something is frozen already (the process froze its own heap, or
    an outer use), nothing is done, so that objects frozen by others stay frozen."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()

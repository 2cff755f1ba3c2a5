"""A frozen dataclass's hash, computed once.

Memory and step-time functions are cached (functools.lru_cache) on models, training settings and
jobs, and plan enumeration looks them up tens of thousands of times. A dataclass's generated hash
re-hashes every field on each lookup, and an Enum field hashes its name in Python code, so the
records that are keys store their hash when they are made.

A stored hash is only valid in the process that computed it: str hashes are salted per process
(PYTHONHASHSEED), so a record pickled with its hash would, unpickled elsewhere, hash unlike an equal
record made there and miss every cache and dict keyed by it. Such records pickle as their fields
(`reduce_by_fields`) and are rebuilt, hash recomputed, where they are loaded."""

from __future__ import annotations

from dataclasses import fields
from operator import attrgetter
from typing import Callable

_COMPARED: dict[type, Callable] = {}  # per class: a getter of its compared fields, as a tuple


def reduce_by_fields(record) -> tuple:
    """`__reduce__` for a record with a stored hash: rebuilt from its init fields (the hash, not
    one of them, is computed anew by the class)."""
    return _rebuilt, (type(record), {f.name: getattr(record, f.name) for f in fields(record) if f.init})


def _rebuilt(cls, values: dict):
    return cls(**values)


def fields_hash(record) -> int:
    """The hash of the fields that take part in comparisons: equal records hash equal. The field
    list is read once per class (a simulation makes a job spec per job and per re-queue)."""
    compared = _COMPARED.get(type(record))
    if compared is None:
        names = [f.name for f in fields(record) if f.compare]
        get = attrgetter(*names)
        compared = _COMPARED[type(record)] = get if len(names) > 1 else lambda r: (get(r),)
    return hash(compared(record))

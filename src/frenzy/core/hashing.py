"""A frozen dataclass's hash, computed once.

Memory and step-time functions are cached (functools.lru_cache) on models, training settings and
jobs, and plan enumeration looks them up tens of thousands of times. A dataclass's generated hash
re-hashes every field on each lookup, and an Enum field hashes its name in Python code, so the
records that are keys store their hash when they are made."""

from __future__ import annotations

from dataclasses import fields


def fields_hash(record) -> int:
    """The hash of the fields that take part in comparisons: equal records hash equal."""
    return hash(tuple(getattr(record, f.name) for f in fields(record) if f.compare))

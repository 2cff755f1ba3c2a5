"""What PyTorch's CUDA out-of-memory message says, read without torch: the worker restates a real
OOM with the least the step needed, and the GPU measurements keep the message of a run that failed."""

from __future__ import annotations

import re

_AMOUNT = r"([\d.]+) (B|KiB|MiB|GiB)"
_REQUESTED = re.compile(r"Tried to allocate " + _AMOUNT)
_HELD = re.compile(r"Of the allocated memory " + _AMOUNT + r" is allocated by PyTorch")
_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def _amount(pattern: re.Pattern, text: str) -> int | None:
    match = pattern.search(text)
    return int(float(match.group(1)) * _UNITS[match.group(2)]) if match else None


def requested_bytes(text: str) -> int | None:
    """The allocation that failed ("Tried to allocate 2.32 GiB")."""
    return _amount(_REQUESTED, text)


def held_bytes(text: str) -> int | None:
    """What PyTorch's tensors held when it failed ("Of the allocated memory 21.60 GiB ...")."""
    return _amount(_HELD, text)

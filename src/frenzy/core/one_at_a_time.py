"""Work that two threads of one process must not do at once.

- transformers' first import. Its top module fills itself lazily, and while one thread is still
  importing it another thread's `from transformers import X` raises ImportError (a server whose
  first two requests both needed it answered 500 to one of them).
- Profiling a family without a formula: describing its module tree and tracing its training step
  (frenzy.core.generic, frenzy.memory.profiled). The tracer patches transformers' helpers for the
  length of a trace, process-wide, so two traces at once would restore each other's patches. A
  profile takes seconds, so a caller that would wait behind more than a few others is told to retry
  (`ProfilerBusy`; the server answers 429) instead of holding a request thread for that long.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

WAITING_PROFILES = 4  # callers that may wait for the profiler; each waits at most this many profiles


class ProfilerBusy(Exception):
    """The profiler is busy and its line is full. Not a FrenzyError: nothing is wrong with the job."""


TRANSFORMERS_IMPORT = threading.Lock()  # held by whoever imports transformers first (frenzy.memory.trace, data)
_profiler = threading.Lock()
_line_lock = threading.Lock()
_in_line = 0  # callers profiling or waiting to


@contextmanager
def profiler_turn(waiting: int = WAITING_PROFILES) -> Iterator[None]:
    """Hold the profiler; wait behind at most `waiting` other callers, else raise ProfilerBusy."""
    global _in_line
    with _line_lock:
        if _in_line > waiting:
            raise ProfilerBusy(f"{_in_line} models of families without a formula are being profiled or waiting "
                               "to be; retry in a few seconds")
        _in_line += 1
    try:
        with _profiler:
            yield
    finally:
        with _line_lock:
            _in_line -= 1

"""Submission data checks off the request threads.

Reading a job's data at submission (frenzy.control.data_check) takes as long as the file is large.
Run on the server's shared worker threads, a few large submissions would hold every thread and stall
all other requests, /healthz included. So the checks run on their own few threads, awaited without
holding any, and only a bounded number of submissions may wait for one: beyond that a submission is
answered 429 at once with when to retry, instead of queueing without limit.
"""

from __future__ import annotations

from typing import Callable, TypeVar

import anyio
import anyio.to_thread

T = TypeVar("T")
DEFAULT_CONCURRENT_CHECKS = 2  # threads reading data at once: each is bound by the disk, not the CPU


class TooManyDataChecks(Exception):
    """Every data-check thread is busy and the waiting line is full."""


class DataCheckGate:
    def __init__(self, concurrent: int = DEFAULT_CONCURRENT_CHECKS, waiting: int | None = None):
        if concurrent < 1:
            raise ValueError(f"concurrent data checks must be >= 1, got {concurrent}")
        self.concurrent = concurrent
        self.waiting = 4 * concurrent if waiting is None else waiting
        self._limiter: anyio.CapacityLimiter | None = None  # made on the server's event loop

    async def run(self, check: Callable[..., T], *args) -> T:
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.concurrent)
        if self._limiter.statistics().tasks_waiting >= self.waiting:
            raise TooManyDataChecks(
                f"{self.concurrent} submissions are reading their data and {self.waiting} more are waiting; "
                "retry in a few seconds")
        return await anyio.to_thread.run_sync(check, *args, limiter=self._limiter)

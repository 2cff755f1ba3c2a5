"""Submission data checks run on their own threads, with a bounded waiting line."""

import threading

import anyio
import pytest

from frenzy.control.data_gate import DataCheckGate, TooManyDataChecks


def test_checks_beyond_the_threads_wait_and_beyond_the_line_are_refused():
    gate = DataCheckGate(concurrent=1, waiting=1)
    release, started = threading.Event(), threading.Event()
    finished = []

    def slow(name):
        started.set()
        release.wait(10)
        return name

    async def main():
        async with anyio.create_task_group() as tasks:
            async def submit(name):
                finished.append(await gate.run(slow, name))

            tasks.start_soon(submit, "first")
            await anyio.to_thread.run_sync(started.wait, 10)
            tasks.start_soon(submit, "second")  # waits for the one thread
            await anyio.sleep(0.05)
            with pytest.raises(TooManyDataChecks, match="retry"):
                await gate.run(slow, "third")
            # the event loop itself is free while the checks run: other requests are served
            assert await anyio.to_thread.run_sync(lambda: "served", limiter=anyio.CapacityLimiter(1)) == "served"
            release.set()

    anyio.run(main)
    assert finished == ["first", "second"]


def test_a_gate_needs_a_thread():
    with pytest.raises(ValueError):
        DataCheckGate(concurrent=0)

"""The fake cluster's reaper on harmless stand-ins: an owner process records the processes it
started (as FakeCluster.start does) and is killed with -9; the next start's reap, or the watchdog,
kills exactly those and the Ray-titled processes of the recorded session, and nothing else."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from frenzy.executor import reaper

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="the reaper reads /proc (Linux)")
SRC = str(Path(reaper.__file__).resolve().parents[2])

OWNER = textwrap.dedent("""
    import json, os, subprocess, sys, time
    from pathlib import Path
    from frenzy.executor import reaper
    state, session, watchdog = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "1"
    t0 = time.time()
    sleep = [sys.executable, "-c", "import time; time.sleep(120)"]
    ray_service = subprocess.Popen(sleep)  # stands for the GCS / a raylet: recorded by pid
    # stands for an agent or worker a raylet starts later: titled ray::..., logs into the session
    worker = subprocess.Popen(["bash", "-c", f"exec -a ray::FakeWorker {sys.executable} -c "
                               f"\\"f = open('{session}/logs/worker-1.out', 'w'); import time; time.sleep(120)\\""])
    time.sleep(0.5)
    reaper.record(state, session_dir=str(session), processes=[ray_service.pid], started_at=t0)
    if watchdog:
        reaper.start_watchdog(state)
    print(json.dumps({"service": ray_service.pid, "worker": worker.pid}), flush=True)
    time.sleep(120)
""")


def _spawn(args: list[str], **kw) -> subprocess.Popen:
    return subprocess.Popen(args, env={**os.environ, "PYTHONPATH": SRC}, **kw)


def _running(pid: int) -> bool:
    started = reaper.start_time(pid)
    return started is not None and reaper.alive(pid, started)


def _wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not _running(pid)


@pytest.fixture
def cluster(tmp_path):
    """An owner with its two 'Ray' processes, a driver that logs into the same session (must
    survive), and an unrelated process (must survive); everything killed by pid afterwards."""
    session = tmp_path / "session_2026_test"
    (session / "logs").mkdir(parents=True)
    started: list[int] = []

    def make(watchdog: bool):
        state = tmp_path / "clusters" / "owner.json"
        owner = _spawn([sys.executable, "-c", OWNER, str(state), str(session), "1" if watchdog else "0"],
                       stdout=subprocess.PIPE, text=True)
        pids = json.loads(owner.stdout.readline())
        driver = _spawn([sys.executable, "-c", f"f = open('{session}/logs/driver.log', 'w'); "
                                               "import time; time.sleep(120)"])
        unrelated = _spawn([sys.executable, "-c", "import time; time.sleep(120)"])
        started.extend([owner.pid, pids["service"], pids["worker"], driver.pid, unrelated.pid])
        time.sleep(0.5)
        return state, owner, pids, driver, unrelated

    yield make
    for pid in started:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def test_reap_kills_what_a_dead_owner_started_and_nothing_else(cluster, tmp_path):
    state, owner, pids, driver, unrelated = cluster(watchdog=False)
    recorded = json.loads(state.read_text())
    assert state.stat().st_mode & 0o777 == 0o600 and state.parent.stat().st_mode & 0o777 == 0o700
    assert recorded["processes"][0]["pid"] == pids["service"]
    # a pid that was reused by another process (other start time) is never taken for a recorded one
    recorded["processes"].append({"pid": unrelated.pid, "started": 1, "cmdline": "gcs_server"})
    state.write_text(json.dumps(recorded))

    assert reaper.reap(state.parent) == []  # the owner lives: its cluster is not a leftover
    assert _running(pids["service"]) and _running(pids["worker"])

    owner.send_signal(signal.SIGKILL)
    owner.wait(10)
    assert _running(pids["service"]) and _running(pids["worker"])  # left behind, as Ray's agents are
    assert sorted(reaper.reap(state.parent)) == sorted([pids["service"], pids["worker"]])
    assert _wait_gone(pids["service"]) and _wait_gone(pids["worker"])
    assert driver.poll() is None and unrelated.poll() is None  # a driver of the session and a stranger stay
    assert not state.exists()
    assert reaper.reap(state.parent) == []


def test_the_watchdog_reaps_as_soon_as_the_owner_dies(cluster):
    state, owner, pids, driver, unrelated = cluster(watchdog=True)
    time.sleep(1.0)
    assert _running(pids["service"])  # the watchdog leaves a live owner's cluster alone
    t = time.monotonic()
    owner.send_signal(signal.SIGKILL)
    owner.wait(10)
    assert _wait_gone(pids["service"]) and _wait_gone(pids["worker"])
    assert time.monotonic() - t < 5
    assert driver.poll() is None and unrelated.poll() is None
    deadline = time.monotonic() + 5
    while state.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not state.exists()

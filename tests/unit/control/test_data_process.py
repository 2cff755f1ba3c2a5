"""A data check in a child process: its memory and time are bounded by the operator's limits, and a
crash, an allocation past the limit or an overrun is an InvalidDataError that says which, while the
calling process is untouched. Each case runs the real forkserver child."""

from __future__ import annotations

import multiprocessing.forkserver
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from frenzy.control.data_process import ORPHAN_GRACE_S, CheckLimits, run_limited
from frenzy.core.units import MiB
from frenzy.data.errors import InvalidDataError

LIMITS = CheckLimits(memory_bytes=256 * MiB, seconds=20)


def answer(value):
    return {"got": value, "pid": os.getpid(), "flag": os.environ.get("FRENZY_TEST_FLAG")}


def crash(_):
    os.kill(os.getpid(), signal.SIGSEGV)


def allocate(n_bytes):
    return len(bytearray(n_bytes))  # touched: a real allocation, not a reservation


def refuse(_):
    raise InvalidDataError("row 3: 'text' must be a string")


def stumble(_):
    return {}["text"]  # a reader's own bug: a KeyError, which the API would otherwise answer with a 500


def sleep(seconds):
    time.sleep(seconds)


def _children_of_the_forkserver() -> list[int]:
    server = multiprocessing.forkserver._forkserver._forkserver_pid
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == server:
            children.append(int(stat.parent.name))
    return children


def test_the_answer_comes_from_another_process_with_the_callers_environment(monkeypatch):
    monkeypatch.setenv("FRENZY_TEST_FLAG", "set-after-the-forkserver-started")
    run_limited(answer, 0, limits=LIMITS)  # the forkserver may start here, before or after the flag
    out = run_limited(answer, [1, "a"], limits=LIMITS)
    assert out["got"] == [1, "a"] and out["pid"] != os.getpid()
    assert out["flag"] == "set-after-the-forkserver-started"


def test_a_domain_error_comes_back_as_raised():
    with pytest.raises(InvalidDataError, match=r"row 3: 'text' must be a string"):
        run_limited(refuse, None, limits=LIMITS)


def test_a_readers_own_bug_is_an_error_about_the_data_that_quotes_it():
    with pytest.raises(InvalidDataError, match=r"reader of this data failed \(KeyError: 'text'\)"):
        run_limited(stumble, None, limits=LIMITS)


def test_a_crash_of_the_reader_is_an_error_naming_the_signal_and_the_caller_lives_on():
    with pytest.raises(InvalidDataError, match="SIGSEGV"):
        run_limited(crash, None, limits=LIMITS)
    assert run_limited(answer, 2, limits=LIMITS)["got"] == 2


def test_memory_beyond_the_limit_is_refused_and_within_it_is_given():
    # 200 MiB fits a 256 MiB allowance; 400 MiB does not, whatever the child started with
    assert run_limited(allocate, 200 * MiB, limits=LIMITS) == 200 * MiB
    with pytest.raises(InvalidDataError, match=r"more than the 0.25 GiB of memory .* --max-check-memory-bytes"):
        run_limited(allocate, 400 * MiB, limits=LIMITS)


def test_an_overrun_is_refused_on_time_and_the_child_is_gone():
    limits = CheckLimits(memory_bytes=256 * MiB, seconds=1)
    run_limited(answer, 0, limits=limits)  # the forkserver is up: what follows times the check alone
    started = time.monotonic()
    with pytest.raises(InvalidDataError, match=r"took over the 1 s .* --max-check-seconds"):
        run_limited(sleep, 30, limits=limits)
    assert time.monotonic() - started < 5
    deadline = time.monotonic() + 5
    while _children_of_the_forkserver() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _children_of_the_forkserver() == []


@pytest.mark.parametrize("kwargs", [{"memory_bytes": 0}, {"memory_bytes": True}, {"memory_bytes": 1.5},
                                    {"seconds": 0}, {"seconds": float("nan")}, {"seconds": float("inf")},
                                    {"seconds": -1}, {"seconds": True}])
def test_limits_are_positive_and_finite(kwargs):
    with pytest.raises(ValueError, match="data check"):
        CheckLimits(**kwargs)


def _descendants(pid: int) -> set[int]:
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_check_whose_server_is_killed_ends_soon_after_its_limit():
    repo = Path(__file__).resolve().parents[3]
    script = ("from frenzy.control.data_process import CheckLimits, run_limited\n"
              "from tests.unit.control.test_data_process import sleep\n"
              "run_limited(sleep, 600, limits=CheckLimits(memory_bytes=1 << 28, seconds=3))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo / "src"), str(repo)])}
    server = subprocess.Popen([sys.executable, "-c", script], cwd=repo, env=env)
    try:
        deadline = time.monotonic() + 60
        while len(_descendants(server.pid)) < 3:  # the resource tracker, the forkserver and the check
            assert server.poll() is None and time.monotonic() < deadline, "the check did not start"
            time.sleep(0.1)
        left = _descendants(server.pid)
    finally:
        server.kill()  # before the server could kill its check
        server.wait()
    killed = time.monotonic()
    deadline = killed + 3 + ORPHAN_GRACE_S + 10
    while any(_alive(pid) for pid in left) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(pid) for pid in left)

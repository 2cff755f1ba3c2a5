"""No process left behind by a fake cluster whose server died.

Ray starts the fake cluster's GCS, raylets and monitors with PR_SET_PDEATHSIG (they die with the
thread that started them), but not what the raylets start: the dashboard and runtime-env agents
(two per node) and the workers (each in its own process group) outlive a `kill -9` of the server
and ignore SIGTERM. Ray's API offers no hook to give them a death signal, so:

1. `record()` writes a state file per fake cluster (0600, in a 0700 folder): the owner's pid and
   start time, the Ray session folder, and the pid, start time and command line of every process
   Ray reported starting.
2. A watchdog (`python -m frenzy.executor.reaper --watch STATE`, its own session so a signal to
   the server's process group does not reach it) checks the owner every 0.5 s; once the owner is
   gone it reaps the cluster and exits. A clean stop deletes the state file, and the watchdog exits.
3. Every fake-cluster start first `reap()`s the state files whose owner is dead (a watchdog that
   was killed too), so leftovers go at the next start at the latest.

A process is reaped only if it is recorded (same pid, start time and command line) or if it is a
Ray agent or worker (`ray::...` title or Ray's own script), started after the cluster, that holds
a file in the recorded session folder (Ray's log files: each agent and worker writes its own
there) - never by name alone, and never a driver that only connected to the cluster. Linux only (/proc); elsewhere a no-op.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

log = logging.getLogger(__name__)
DEFAULT_STATE_DIR = Path("~/.frenzy/fake-clusters")
WATCH_INTERVAL_S = 0.5
PROC = Path("/proc")


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), None if gone."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2:].split()[19])


def command_line(pid: int) -> str:
    try:
        return (PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def alive(pid: int, started: int | None) -> bool:
    """The same process (pid and start time) is still there and not a zombie."""
    if started is None or start_time(pid) != started:
        return False
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _uses_folder(pid: int, folder: str) -> bool:
    prefix = folder.rstrip("/") + "/"
    if prefix in command_line(pid) + " ":
        return True
    try:
        entries = os.listdir(PROC / str(pid) / "fd")
    except OSError:
        return False
    for fd in entries:
        try:
            target = os.readlink(PROC / str(pid) / "fd" / fd)
        except OSError:
            continue
        if target.startswith(prefix):
            return True
    return False


def _started_by_ray(pid: int) -> bool:
    """A Ray agent or worker (titled `ray::...`, or still Ray's own script), not a driver that
    merely connected to the cluster (a driver logs into the session folder too)."""
    line = command_line(pid)
    return line.startswith("ray::") or f"site-packages{os.sep}ray{os.sep}" in line


def _boot_ticks(wall_time: float) -> int:
    """A wall-clock time as clock ticks since boot (to compare with start_time)."""
    uptime = float((PROC / "uptime").read_text().split()[0])
    return int((wall_time - (time.time() - uptime)) * os.sysconf("SC_CLK_TCK"))


def record(path: Path, *, session_dir: str, processes: list[int], started_at: float,
           owner: int | None = None) -> dict:
    """Write the state file of a fake cluster that this process (or `owner`) started at
    `started_at` (wall clock, before its first process)."""
    owner = owner or os.getpid()
    state = {"owner": owner, "owner_started": start_time(owner), "session_dir": session_dir,
             "started_at": started_at - 1.0,  # slack for the clock-tick rounding
             "processes": [{"pid": p, "started": start_time(p), "cmdline": command_line(p)} for p in processes]}
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(state, f)
    os.replace(tmp, path)
    return state


def leftovers(state: dict) -> list[int]:
    """Live processes that belong to the recorded cluster (see the module docstring)."""
    if not PROC.is_dir():
        return []
    found = {p["pid"] for p in state["processes"]
             if alive(p["pid"], p["started"]) and command_line(p["pid"]) == p["cmdline"]}
    folder = state.get("session_dir") or ""
    if folder.startswith("/") and len(folder.strip("/")) > 4:  # never a bare / or /tmp
        after = _boot_ticks(state["started_at"])
        for entry in PROC.iterdir():
            if not entry.name.isdigit() or int(entry.name) in found or int(entry.name) == os.getpid():
                continue
            pid = int(entry.name)
            started = start_time(pid)
            if started is not None and started >= after and _started_by_ray(pid) and _uses_folder(pid, folder):
                found.add(pid)
    return sorted(found)


def read_state(path: Path) -> dict | None:
    try:
        state = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) and "owner" in state else None


def kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)  # Ray's agents ignore SIGTERM
        except OSError:
            pass


def reap_state(path: Path) -> list[int]:
    """Kill what the state file's dead owner left behind, then delete the file; [] if the owner lives."""
    state = read_state(path)
    if state is None or alive(state["owner"], state.get("owner_started")):
        return []
    pids = leftovers(state)
    kill(pids)
    path.unlink(missing_ok=True)
    if pids:
        log.warning("reaped %d process(es) left by the fake cluster of dead process %s (session %s): %s",
                    len(pids), state["owner"], state.get("session_dir"), pids)
    return pids


def reap(state_dir: Path = DEFAULT_STATE_DIR) -> list[int]:
    """Reap every fake cluster in `state_dir` whose owner is dead."""
    state_dir = Path(state_dir).expanduser()
    if not state_dir.is_dir():
        return []
    return [pid for path in sorted(state_dir.glob("*.json")) for pid in reap_state(path)]


def start_watchdog(path: Path) -> subprocess.Popen:
    """A process of its own session that reaps the cluster once its owner is gone."""
    return subprocess.Popen([sys.executable, "-m", "frenzy.executor.reaper", "--watch", str(path)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, close_fds=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})


def watch(path: Path, interval_s: float = WATCH_INTERVAL_S) -> None:
    while True:
        state = read_state(path)
        if state is None:
            return  # stopped cleanly: the state file is gone
        if not alive(state["owner"], state.get("owner_started")):
            reap_state(path)
            return
        time.sleep(interval_s)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--watch":
        watch(Path(sys.argv[2]))
    else:
        sys.exit("usage: python -m frenzy.executor.reaper --watch STATE_FILE")

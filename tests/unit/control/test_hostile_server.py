"""Issue 25's hostile list against a real server process: the app, store and in-process executor
under uvicorn on a loopback port, in a child process so that its own peak memory (VmHWM) is what is
measured. Every request is a 4xx within a second, /healthz answers while 42 requests name FIFOs,
nothing is queued, and the server's peak RSS stays under 1 GiB."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

import httpx
import pytest

REPO = Path(__file__).resolve().parents[3]
SERVE = """
import sys, uvicorn
from pathlib import Path
from tests.unit.control.conftest import build_client
uvicorn.run(build_client(Path(sys.argv[1])).app, host="127.0.0.1", port=int(sys.argv[2]), log_level="error")
"""
MAX_RSS_BYTES = 1 << 30
SECRET = "do-not-echo-5c1e"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _peak_rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/PID/status")


@contextlib.contextmanager
def server_process(script: str, root: Path, timeout_s: float = 10) -> Iterator[httpx.Client]:
    """A client of `script` (argv: root, port) serving in a child process, so that the server's own
    peak memory is what /proc reports for `client.pid`; stopped afterwards."""
    if not Path("/proc/self/status").exists():
        pytest.skip("the server's peak memory is read from /proc (Linux)")
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    proc = subprocess.Popen([sys.executable, "-c", script, str(root), str(port)], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=timeout_s)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if client.get("/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.2)
        client.pid, client.proc, client.root = proc.pid, proc, root
        yield client
    finally:
        client.close()
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def server(tmp_path):
    with server_process(SERVE, tmp_path) as client:
        yield client


def _timed(call, *args, **kwargs) -> httpx.Response:
    started = time.perf_counter()
    response = call(*args, **kwargs)
    assert time.perf_counter() - started < 1.0, (args, f"{time.perf_counter() - started:.2f} s")
    return response


def _raw_status(client, request: bytes) -> int:
    """The status a request gets, sent as bytes (an HTTP client refuses to send a 1 MB URL)."""
    started = time.perf_counter()
    with socket.create_connection((client.base_url.host, client.base_url.port), timeout=5) as s:
        s.sendall(request)
        status = int(s.recv(64).split()[1])
    assert time.perf_counter() - started < 1.0
    return status


def _refused(client, body=None, **kwargs) -> httpx.Response:
    r = _timed(client.post, "/v1/jobs", **({"json": body} if body is not None else kwargs))
    assert 400 <= r.status_code < 500, r.text
    assert isinstance(r.json()["detail"], str) and SECRET not in r.text
    return r


def test_the_hostile_list_is_answered_4xx_at_once_with_the_server_healthy_and_small(server, tmp_path_factory):
    root = server.root
    os.mkfifo(root / "config.json")
    os.symlink("/dev/zero", root / "zero.jsonl")
    outside = tmp_path_factory.mktemp("outside")
    (outside / "config.json").write_text(json.dumps({"model_type": "llama", "_name_or_path": SECRET}))

    # files the server must never read: a device, a FIFO (42 at once, /healthz answering meanwhile)
    for body in ({"model": "/dev/zero"}, {"model": "gpt2", "dataset": "/dev/zero"},
                 {"model": "gpt2", "dataset": str(root / "zero.jsonl")}):
        _refused(server, body)
    with ThreadPoolExecutor(42) as pool:
        fifos = [pool.submit(_refused, server, {"model": str(root / "config.json")}) for _ in range(42)]
        assert _timed(server.get, "/healthz").status_code == 200
        answers = [f.result() for f in fifos]
    # each is refused as a pipe, or (beyond the submissions that may read data at once) told to retry
    assert all(r.status_code == 422 and "pipe" in r.json()["detail"] or r.status_code == 429 and
               r.headers["retry-after"] for r in answers), {(r.status_code, r.json()["detail"]) for r in answers}

    # a file outside the data roots: neither read nor said to exist
    details = set()
    for path in (outside / "config.json", outside / "missing.json"):
        r = _timed(server.get, "/v1/plans", params={"model": str(path)})
        assert r.status_code == 422 and SECRET not in r.text
        details.add(r.json()["detail"].replace(str(path), "PATH"))
    assert len(details) == 1

    # bodies of 8 MiB and 30 MB, and numbers and names beyond every bound
    for size in (8 << 20, 30_000_000):
        body = b'{"model": "gpt2", "name": "' + b"x" * size + b'"}'
        r = _refused(server, content=body, headers={"content-type": "application/json"})
        assert r.status_code == 413
    for field in ({"global_batch": 10**12}, {"global_batch": 2**70}, {"steps": 10**12}, {"tokens": 10**18},
                  {"global_batch": True}, {"lora_targets": []}, {"priority": 2**63}, {"priority": 2**31},
                  {"name": "x" * 201}, {"name": "a\x00b"}):
        assert _refused(server, {"model": "gpt2", **field}).status_code == 422

    # query strings: a sequence number beyond 64 bits, and 1 MB of query
    assert _timed(server.get, f"/v1/jobs/j-0/logs?after={2**64}").status_code == 422
    assert 400 <= _raw_status(server, b"GET /v1/jobs?state=" + b"x" * (1 << 20) + b" HTTP/1.1\r\nHost: x\r\n\r\n") < 500

    assert _timed(server.get, "/healthz").json()["ok"]
    assert server.get("/v1/jobs").json() == []
    assert _peak_rss_bytes(server.pid) < MAX_RSS_BYTES

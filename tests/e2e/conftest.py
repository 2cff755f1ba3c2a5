"""A real local Ray cluster with two fake GPU types, and the Frenzy server as a real subprocess
(so the restart test can kill and start it again)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Emulated cards: an 80G-class type with 6 GiB and a 24G-class type with 3 GiB per GPU.
NODES = "A100-SXM-80G:2:6GiB,A10G-24G:2:3GiB"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory):
    pytest.importorskip("ray", reason="the e2e tests need the ray extra (make test installs it)")
    home = tmp_path_factory.mktemp("frenzy-home")
    os.environ["RAY_AUTH_TOKEN_PATH"] = str(home / "ray_auth_token")  # token auth on, test-local token
    os.environ.pop("RAY_AUTH_MODE", None)
    # Ray Train's wait for a worker group's GPUs (120 s by default, see ray_env): shortened so that
    # the test of GPUs held outside Frenzy sees its attempt lost in seconds. Set before Ray starts.
    os.environ["RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S"] = "8"
    from frenzy.executor.fake_cluster import FakeCluster, parse_nodes

    cluster = FakeCluster(parse_nodes(NODES))
    cluster.start()
    yield cluster, home
    cluster.stop()


@pytest.fixture
def ray_view(ray_cluster):
    """This test process connected to the Ray cluster as a driver, to read what Ray itself holds;
    disconnected afterwards (the cluster will not stop under a connected driver)."""
    import ray

    ray.init(address=ray_cluster[0].address, log_to_driver=False)
    yield ray
    ray.shutdown()


class Server:
    def __init__(self, address: str, home: Path):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.db = f"sqlite:///{home / 'frenzy.db'}"
        self.home, self.address = home, address
        self.proc = None

    def start(self) -> None:
        from frenzy.cli.client import Client

        log = open(self.home / "server.log", "a")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "frenzy.cli.main", "serve", "--port", str(self.port), "--db-url", self.db,
             "--ray-address", self.address, "--fake-gpu", "--storage", str(self.home / "jobs"),
             "--step-delay", "1.0", "--data-root", str(ROOT / "examples"), "--data-root", str(self.home)],
            stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
        client = Client(self.url)
        deadline = time.time() + 120
        while not client.healthy():
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"server did not start; see {self.home / 'server.log'}:\n"
                                   + (self.home / "server.log").read_text()[-3000:])
            time.sleep(0.5)

    def kill(self) -> None:
        """SIGKILL: no cleanup at all, as in a crash."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture(scope="session")
def server(ray_cluster):
    cluster, home = ray_cluster
    srv = Server(cluster.address, home)
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def client(server):
    from frenzy.cli.client import Client

    return Client(server.url)

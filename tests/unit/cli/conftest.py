"""A Frenzy server for the client commands: the real app, store and loop on a loopback port."""

from __future__ import annotations

from types import SimpleNamespace

import pytest


@pytest.fixture(scope="session")
def loopback(tmp_path_factory):
    """The real app, store and loop on 127.0.0.1 (bench/control_loop's server: 12 nodes of 8 GPUs;
    jobs are placed and never finish), reading files under examples/ as with --data-root."""
    from bench.control_loop import _serve

    folder = tmp_path_factory.mktemp("server")
    client, _, stop = _serve(str(folder), loop_running=True)
    yield SimpleNamespace(url=client.url, db=f"sqlite:///{folder / 'f.db'}")
    stop()


@pytest.fixture
def server(loopback):
    return loopback.url


@pytest.fixture
def server_db(loopback):
    """The loopback server's job store (where `frenzy token create` writes)."""
    return loopback.db

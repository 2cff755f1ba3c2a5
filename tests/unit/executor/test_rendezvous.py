"""The workers' rendezvous store listens on the node's address only (torch's own listens on "::").
A Ray Train run on a loopback cluster showed the same: rank 0's store on 127.0.0.1:<MASTER_PORT>
with BoundTorchConfig, on :::<MASTER_PORT> with Ray's TorchConfig."""

from __future__ import annotations

from datetime import timedelta

import pytest

psutil = pytest.importorskip("psutil")
pytest.importorskip("ray.train.torch")


def _listening(port: int) -> set[str]:
    return {c.laddr.ip for c in psutil.Process().net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN and c.laddr.port == port}


def test_store_listens_on_the_given_address_only():
    from torch.distributed import TCPStore

    from frenzy.executor.rendezvous import bound_store

    server, port = bound_store("127.0.0.1", timeout_s=10)
    assert _listening(port) == {"127.0.0.1"}
    client = TCPStore("127.0.0.1", port, 2, False, timeout=timedelta(seconds=10))
    client.set("rank1", "ready")
    assert server.get("rank1") == b"ready"


def test_trainer_config_uses_the_bound_backend():
    from frenzy.executor.rendezvous import BoundTorchConfig, _BoundTorchBackend

    config = BoundTorchConfig(backend="gloo")
    assert config.backend_cls is _BoundTorchBackend and config.backend == "gloo"

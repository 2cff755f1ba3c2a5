"""Worker rendezvous bound to the node's own address, not to every interface.

Ray Train's TorchTrainer sets MASTER_ADDR to rank 0's node IP (`ray.util.get_node_ip_address()`) and
a free port, and every rank calls `init_process_group("env://")`: rank 0 then starts the
torch.distributed TCPStore, which listens on all interfaces ("::", dual-stack) whatever MASTER_ADDR
says; torch has no option for its bind address. Anyone who can reach the port can read and write
the store (it is unauthenticated) and disturb or join the rendezvous.

torch does let the store's server take a socket the caller has bound (`master_listen_fd`). So rank 0
binds one on its node IP, starts the store's server on it, and every rank, rank 0 included, joins
as a client (`TORCHELASTIC_USE_AGENT_STORE=True`: what torchrun does with its agent's store). The
rest of Ray Train's set-up is unchanged. Gloo's own sockets bind to the address the host name
resolves to (or GLOO_SOCKET_IFNAME: ray_env sets `lo` for the loopback fake cluster); NCCL's bind to
the interface it picks (NCCL_SOCKET_IFNAME).
"""

from __future__ import annotations

import os
import socket
from datetime import timedelta

import ray
from ray.train.torch import TorchConfig
from ray.train.torch.config import _set_torch_distributed_env_vars, _setup_torch_process_group, _TorchBackend

_server = None  # the TCPStore server, held in rank 0's worker process while the group lives


def bound_store(address: str, timeout_s: float = 1800):
    """A TCPStore server listening on `address` only (port chosen free); returns (store, port)."""
    from torch.distributed import TCPStore

    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.bind((address, 0))
        sock.listen(1024)
        port = sock.getsockname()[1]
    except OSError:
        sock.close()
        raise
    store = TCPStore(address, port, None, True, timeout=timedelta(seconds=timeout_s), wait_for_workers=False,
                     master_listen_fd=sock.detach())  # the store owns the socket from here
    return store, port


def _serve_store(timeout_s: float) -> tuple[str, int]:
    global _server
    address = ray.util.get_node_ip_address()
    _server, port = bound_store(address, timeout_s)
    return address, port


def _drop_store() -> None:
    global _server
    _server = None


def _join_as_clients(address: str, port: int) -> None:
    os.environ.update(MASTER_ADDR=address, MASTER_PORT=str(port), TORCHELASTIC_USE_AGENT_STORE="True")


class _BoundTorchBackend(_TorchBackend):
    def on_start(self, worker_group, backend_config) -> None:
        # As Ray Train's own (2.60), with the store served by rank 0 on its node address.
        address, port = worker_group.execute_single(0, _serve_store, timeout_s=backend_config.timeout_s)
        worker_group.execute(_join_as_clients, address=address, port=port)
        worker_group.execute(_set_torch_distributed_env_vars)
        ray.get([worker_group.execute_single_async(i, _setup_torch_process_group, backend=backend_config.backend,
                                                   world_rank=i, world_size=len(worker_group),
                                                   init_method="env://", timeout_s=backend_config.timeout_s)
                 for i in range(len(worker_group))])

    def on_shutdown(self, worker_group, backend_config) -> None:
        super().on_shutdown(worker_group, backend_config)
        try:
            worker_group.execute_single(0, _drop_store)
        except Exception:  # noqa: BLE001 - the worker is gone already, and its store with it
            pass


class BoundTorchConfig(TorchConfig):
    """TorchConfig whose rendezvous store listens on rank 0's node address only. `backend` is required."""

    @property
    def backend_cls(self):
        return _BoundTorchBackend

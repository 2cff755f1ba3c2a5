"""Process environment for talking to Ray: token authentication, loopback-only fake clusters,
and Ray Train start-up timeouts. Set before `ray.init` / before starting any Ray node.

Token authentication (Ray >= 2.52; 2.60 turns it on for new local clusters): Frenzy always sets
RAY_AUTH_MODE explicitly rather than relying on Ray's default. With mode `token` (the default) the
token comes from RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH if the operator set one, else from
~/.frenzy/ray_auth_token, generated once with mode 0600. Every node of the cluster and the Frenzy
server must share it (`frenzy ray-node-args` prints the exports). Turning it off needs an explicit
RAY_AUTH_MODE=disabled, which Frenzy accepts only for its own loopback fake cluster.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

from frenzy.train.config import CUDA_ALLOCATOR_CONF

DEFAULT_TOKEN_PATH = Path("~/.frenzy/ray_auth_token")
# Seconds Ray Train waits for a worker group's placement group before removing it and asking again,
# and how often it asks again (runner.py passes it as FailureConfig.controller_failure_limit; Ray's
# default, -1, asks forever). Frenzy places only on GPUs it holds free, so GPUs that do not come
# are held outside Frenzy or were on a node that left: after the last try the attempt ends as lost
# and the job is re-planned on the cluster as it is now, instead of waiting on GPUs that may never
# come. The environment variable overrides the timeout (the end-to-end tests shorten it).
WORKER_GROUP_START_TIMEOUT_S = "120"
WORKER_GROUP_START_RETRIES = 2


class RayAuthError(RuntimeError):
    pass


def ensure_token() -> Path | None:
    """The token file Ray will use (created if Frenzy owns it), or None if RAY_AUTH_TOKEN is set."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return None
    path = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or DEFAULT_TOKEN_PATH).expanduser()
    if not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
    os.environ["RAY_AUTH_TOKEN_PATH"] = str(path)
    return path


def configure(*, fake_cluster: bool) -> str:
    """Set the Ray environment for this process and the Ray processes it starts; returns the auth mode."""
    mode = os.environ.setdefault("RAY_AUTH_MODE", "token").lower()
    if mode not in ("token", "disabled"):
        raise RayAuthError(f"RAY_AUTH_MODE={mode} is not supported; use token (default) or disabled")
    if mode == "disabled" and not fake_cluster:
        raise RayAuthError("RAY_AUTH_MODE=disabled leaves the Ray cluster open to anyone who can reach it; "
                           "unset it to use token authentication (see docs/SERVING.md), or use --fake-cluster")
    if mode == "token":
        ensure_token()
    if fake_cluster:
        # Keep every Ray address on 127.0.0.1: Ray otherwise advertises the machine's outward IP.
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
        # Gloo's sockets bind to the address the host name resolves to, often the outward one: keep the
        # fake cluster's workers on loopback (their rendezvous store is on the node's 127.0.0.1: rendezvous.py).
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Ray workers on nodes this process starts inherit it before they initialise CUDA.
    os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", CUDA_ALLOCATOR_CONF)
    os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")
    os.environ.setdefault("RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S", WORKER_GROUP_START_TIMEOUT_S)
    if "ray._raylet" in sys.modules:  # ray was imported before: make its cached settings see ours
        from ray._private import ray_constants
        from ray._raylet import Config

        Config.initialize("")
        if fake_cluster:
            ray_constants.ENABLE_RAY_CLUSTER = False
    return mode

"""Wire the live system together and serve it: store, Ray executor (optionally on a fake local
cluster), control loop thread, FastAPI app on uvicorn."""

from __future__ import annotations

import logging
import os
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.exc import SQLAlchemyError

from frenzy.control.data_process import CheckLimits, start_data_checks
from frenzy.control.inputs import InputPolicy
from frenzy.control.limits import DEFAULT_MAX_BODY_BYTES
from frenzy.control.loop import ControlLoop, LoopSettings
from frenzy.control.ports import SystemClock
from frenzy.control.service import ControlService
from frenzy.control.store import SqlJobStore, open_error
from frenzy.core.errors import InvalidConfigError

log = logging.getLogger("frenzy.server")


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = 8000
    db_url: str | None = None  # default: FRENZY_DB_URL or ~/.frenzy/frenzy.db
    ray_address: str | None = None  # an existing cluster; None with fake_nodes starts one
    fake_nodes: str | None = None  # "demo" or "A10G-24G:4:3GiB,..." (frenzy.executor.fake_cluster)
    fake_gpu: bool = False  # the cluster at ray_address is a fake-GPU one (CPU workers, gloo)
    storage_root: Path = Path("~/.frenzy/jobs")
    policy: str = "frenzy"
    metrics_auth: bool = True  # /metrics needs a token whenever the API does (frenzy.control.auth)
    tick_s: float = 0.5
    step_delay_s: float = 0.0
    loop: LoopSettings = field(default_factory=LoopSettings)
    data_roots: tuple[Path, ...] = ()  # folders requests may name files in (plus FRENZY_DATA_ROOTS)
    max_data_bytes: int | None = None  # largest data file read (None: frenzy.control.inputs' 1 GiB)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES  # largest request body (413 beyond)
    check_limits: CheckLimits = CheckLimits()  # memory and time of one submission's data check


def build(settings: ServerSettings):
    """(service, app, cleanup) for these settings; the caller runs the app."""
    from frenzy.control.api import create_app
    from frenzy.control.auth import AuthSettings, check_listen

    try:  # a bad root is reported before anything starts
        inputs = InputPolicy.from_settings(settings.data_roots, settings.max_data_bytes,
                                           check_limits=settings.check_limits)
    except InvalidConfigError as exc:
        raise SystemExit(f"error: {exc}") from None
    try:  # first: no Ray cluster is started for a server that is refused
        store = SqlJobStore(settings.db_url)
    except (SQLAlchemyError, ImportError, OSError) as exc:
        raise SystemExit(f"error: {open_error(settings.db_url, exc)}; pass --db-url sqlite:///PATH or "
                         "postgresql://USER@HOST/DB, or set FRENZY_DB_URL") from None
    try:
        check_listen(settings.host, store)
    except SystemExit:
        store.close()
        raise
    from frenzy.executor import ray_env

    cluster = None
    address = settings.ray_address or os.environ.get("FRENZY_RAY_ADDRESS")
    fake = settings.fake_nodes is not None or settings.fake_gpu
    ray_env.configure(fake_cluster=fake)  # before ray is imported: auth mode and addresses are read then
    from frenzy.executor.ray_executor import RayExecutor

    if settings.fake_nodes is not None and not address:
        from frenzy.executor.fake_cluster import FakeCluster, parse_nodes

        cluster = FakeCluster(parse_nodes(settings.fake_nodes))
        address = cluster.start()
    if not address:
        raise SystemExit("no Ray cluster: pass --ray-address HOST:PORT (or set FRENZY_RAY_ADDRESS), "
                         "or --fake-cluster demo for a local fake-GPU cluster")
    executor = RayExecutor(address=address, storage_root=settings.storage_root, fake_cluster=fake)
    loop = ControlLoop(store=store, executor=executor, clock=SystemClock(), settings=LoopSettings(
        policy=settings.policy, storage_root=settings.storage_root, fake_gpu=fake,
        step_delay_s=settings.step_delay_s))
    service = ControlService(store=store, executor=executor, clock=SystemClock(), loop=loop, tick_s=settings.tick_s,
                             inputs=inputs)
    app = create_app(service, auth=AuthSettings.for_host(settings.host, metrics_auth=settings.metrics_auth),
                     max_body_bytes=settings.max_body_bytes)

    def cleanup():
        service.stop()
        executor.shutdown()
        store.close()
        if cluster is not None:
            cluster.stop()

    return service, app, cleanup, address


def serve(settings: ServerSettings) -> None:
    import uvicorn

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Everything the server creates (job store, checkpoints, artifacts, a fake cluster's files) is the
    # operator's alone: no other local user reads a job's data or the store's token hashes.
    os.umask(0o077)
    service, app, cleanup, address = build(settings)
    log.info("Ray cluster %s; job store %s; data roots: %s", address, service.store.url,
             service.inputs.describe_roots())
    start_data_checks()  # the first submission with data should not wait for the checker's imports
    service.start()
    threading.Thread(target=_import_profiler, name="frenzy-profiler-import", daemon=True).start()
    # uvicorn shuts down gracefully on SIGTERM and then re-raises it to the previous handler; a
    # no-op one lets the cleanup below (loop, Ray connection, fake cluster) run to the end.
    signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning")
    finally:
        cleanup()


def _import_profiler() -> None:
    """Import the tracer (torch, transformers) while the server starts, not in the first request for
    a family without a formula: that request would pay seconds of imports before it could even be
    refused. A request that needs it sooner waits on Python's import lock; without the trace extra
    that request gets the install hint instead."""
    try:
        import frenzy.memory.trace.profile  # noqa: F401
        import frenzy.memory.trace.structure  # noqa: F401
    except ImportError as exc:
        log.info("families without a formula cannot be profiled here (%s is not installed)", exc.name)

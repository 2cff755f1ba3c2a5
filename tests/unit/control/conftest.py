"""The HTTP API over the real store and loop, with an in-process executor (no Ray here; e2e has it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from frenzy.control.api import create_app
from frenzy.control.auth import AuthSettings
from frenzy.control.inputs import InputPolicy
from frenzy.control.limits import DEFAULT_MAX_BODY_BYTES
from frenzy.control.loop import ControlLoop, LoopSettings
from frenzy.control.service import ControlService
from frenzy.control.store import SqlJobStore
from frenzy.core.units import GiB
from tests.unit.control.fakes import FakeClock, InProcessExecutor, node

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def build_client(tmp_path: Path, inputs: InputPolicy | None = None,
                 max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, auth: AuthSettings | None = None,
                 db_url: str | None = None) -> TestClient:
    """A client of the real app (on SQLite in tmp_path unless db_url names another store). Requests
    may name files in the repository's examples/ and the test's own folder, as a server started with
    --data-root for each would allow."""
    store = SqlJobStore(db_url or f"sqlite:///{tmp_path / 'f.db'}")
    executor = InProcessExecutor([node("big-0", "A100-SXM-80G", 2, 3 * GiB),
                                  node("small-0", "A10G-24G", 4, int(1.5 * GiB))])
    clock = FakeClock()
    loop = ControlLoop(store=store, executor=executor, clock=clock, settings=LoopSettings(storage_root=tmp_path))
    inputs = inputs if inputs is not None else InputPolicy(roots=(EXAMPLES, tmp_path))
    service = ControlService(store=store, executor=executor, clock=clock, loop=loop, inputs=inputs)
    client = TestClient(create_app(service, auth=auth, max_body_bytes=max_body_bytes), base_url="http://127.0.0.1")
    client.loop, client.executor, client.store = loop, executor, store
    return client


@pytest.fixture
def client(tmp_path):
    return build_client(tmp_path)

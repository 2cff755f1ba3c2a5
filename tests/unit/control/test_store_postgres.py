"""The job store against a real PostgreSQL: installed from Debian's packages when missing (as
root), started in a temporary folder on a Unix socket, and removed afterwards."""

from __future__ import annotations

import pytest

from tests.postgres import Unavailable, local_postgres
from tests.unit.control.conftest import build_client
from tests.unit.control.test_store import exercise_store

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def postgres_url():
    pytest.importorskip("psycopg", reason="psycopg is not installed (the serve extra)")
    try:
        with local_postgres() as url:
            yield url
    except Unavailable as exc:
        pytest.skip(str(exc))


def test_postgres_store_state_machine_and_restart(postgres_url):
    exercise_store(postgres_url)


@pytest.mark.parametrize("field, at_the_bound, beyond", [
    ("name", "é" * 200, "é" * 201),  # 200 characters, 400 bytes: the column counts characters
    ("name", "a" * 200, "a\x00b"),
    ("priority", 2**31 - 1, 2**31),
    ("priority", -(2**31), -(2**31) - 1),
])
def test_the_api_bounds_are_the_postgres_columns(postgres_url, tmp_path, field, at_the_bound, beyond):
    """What the API accepts, PostgreSQL stores (the bound itself: 201, not a 500); one beyond is a
    422 before the store is reached, as on SQLite."""
    client = build_client(tmp_path, db_url=postgres_url)
    body = {"model": "gpt2", "steps": 2}
    r = client.post("/v1/jobs", json={**body, field: at_the_bound})
    assert r.status_code == 201, r.text
    assert client.get(f"/v1/jobs/{r.json()['id']}").json()[field] == at_the_bound
    r = client.post("/v1/jobs", json={**body, field: beyond})
    assert r.status_code == 422 and [field] in [e["loc"] for e in r.json()["errors"]], r.text
    client.store.close()

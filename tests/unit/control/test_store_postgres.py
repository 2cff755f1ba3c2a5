"""The job store against a real PostgreSQL: installed from Debian's packages when missing (as
root), started in a temporary folder on a Unix socket, and removed afterwards."""

from __future__ import annotations

import pytest

from tests.postgres import Unavailable, local_postgres
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

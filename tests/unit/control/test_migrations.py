"""Alembic migrations of the job store: a database made by Frenzy before migrations (tables from
`metadata.create_all`, jobs in it, no alembic_version) upgrades in place with nothing lost, and the
migrated schema equals the store's tables. On SQLite always, on PostgreSQL when the test's own
server can run (tests/unit/control/test_store_postgres.py)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from frenzy.control import migrations
from frenzy.control.store import SqlJobStore, metadata
from frenzy.control.states import JobState
from tests.unit.control.test_store_postgres import postgres_url  # noqa: F401 (a fixture)


def _legacy_schema() -> sa.MetaData:
    """The tables exactly as store.py declared them before migrations (commit cee74e7), frozen here."""
    old = sa.MetaData()
    sa.Table("frenzy_jobs", old,
             sa.Column("id", sa.String(32), primary_key=True),
             sa.Column("name", sa.String(200), nullable=False),
             sa.Column("state", sa.String(16), nullable=False, index=True),
             sa.Column("request", sa.JSON, nullable=False),
             sa.Column("priority", sa.Integer, nullable=False),
             sa.Column("submitted_at", sa.Float, nullable=False),
             sa.Column("updated_at", sa.Float, nullable=False),
             sa.Column("plans", sa.JSON, nullable=False),
             sa.Column("chosen", sa.JSON),
             sa.Column("allocation", sa.JSON, nullable=False),
             sa.Column("attempts", sa.Integer, nullable=False),
             sa.Column("cancel_requested", sa.Boolean, nullable=False),
             sa.Column("failure_reason", sa.Text, nullable=False),
             sa.Column("progress", sa.JSON, nullable=False),
             sa.Column("at_risk", sa.Boolean, nullable=False),
             sa.Column("placed_at", sa.Float),
             sa.Column("started_at", sa.Float),
             sa.Column("finished_at", sa.Float))
    sa.Table("frenzy_attempts", old,
             sa.Column("job_id", sa.String(32), sa.ForeignKey("frenzy_jobs.id"), primary_key=True),
             sa.Column("number", sa.Integer, primary_key=True),
             sa.Column("outcome", sa.String(16), nullable=False),
             sa.Column("choice", sa.JSON, nullable=False),
             sa.Column("allocation", sa.JSON, nullable=False),
             sa.Column("started_at", sa.Float, nullable=False),
             sa.Column("ended_at", sa.Float),
             sa.Column("error", sa.Text, nullable=False),
             sa.Column("observed_peak_bytes", sa.JSON, nullable=False),
             sa.Column("observed_source", sa.String(16), nullable=False))
    sa.Table("frenzy_logs", old,
             sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
             sa.Column("job_id", sa.String(32), nullable=False, index=True),
             sa.Column("ts", sa.Float, nullable=False),
             sa.Column("line", sa.Text, nullable=False))
    sa.Table("frenzy_calibration", old,
             sa.Column("family", sa.String(64), primary_key=True),
             sa.Column("gpu_type", sa.String(64), primary_key=True),
             sa.Column("factor", sa.Float, nullable=False),
             sa.Column("samples", sa.Integer, nullable=False),
             sa.Column("updated_at", sa.Float, nullable=False))
    return old


def _legacy_store(url: str) -> None:
    """A database as the pre-migration code left it: two jobs (one finished, with an attempt and
    logs) and a calibration row."""
    old = _legacy_schema()
    engine = sa.create_engine(url)
    old.create_all(engine)
    job = dict(request={"model": "gpt2"}, priority=0, submitted_at=1.0, updated_at=2.0, plans=[], chosen=None,
               allocation=[], attempts=0, cancel_requested=False, failure_reason="", progress={}, at_risk=False)
    with engine.begin() as conn:
        conn.execute(old.tables["frenzy_jobs"].insert(), [
            dict(job, id="j-old1", name="first", state="queued"),
            dict(job, id="j-old2", name="second", state="succeeded", attempts=1, allocation=[["n1", 2]],
                 chosen={"gpu_type": "A10G-24G", "memory": {"device_bytes": 5}}, finished_at=9.0)])
        conn.execute(old.tables["frenzy_attempts"].insert().values(
            job_id="j-old2", number=1, outcome="succeeded", choice={"gpu_type": "A10G-24G",
                                                                      "memory": {"device_bytes": 5}},
            allocation=[["n1", 2]], started_at=3.0, ended_at=9.0, error="", observed_peak_bytes=[4, 5],
            observed_source="cuda"))
        conn.execute(old.tables["frenzy_logs"].insert(), [dict(job_id="j-old2", ts=3.0, line="hello")])
        conn.execute(old.tables["frenzy_calibration"].insert().values(family="llama", gpu_type="A10G-24G",
                                                                      factor=1.1, samples=3, updated_at=4.0))
    engine.dispose()


def _schema_diff(engine) -> list:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return [d for d in compare_metadata(MigrationContext.configure(conn), metadata)
                if not (isinstance(d, tuple) and d[0] == "remove_table" and d[1].name == "alembic_version")]


def check_upgrade_from_legacy(url: str) -> None:
    _legacy_store(url)
    store = SqlJobStore(url)  # what the server does on start
    with store.engine.connect() as conn:
        assert migrations.current(conn) == migrations.head() == "0003_teams_quotas"
    assert _schema_diff(store.engine) == []
    first, second = store.get_job("j-old1"), store.get_job("j-old2")
    assert first.state is JobState.QUEUED and first.owner == "local" and first.request == {"model": "gpt2"}
    assert second.state is JobState.SUCCEEDED and second.allocation == (("n1", 2),) and second.owner == "local"
    assert store.attempt("j-old2", 1).observed_peak_bytes == (4, 5)
    assert [line for _, _, line in store.logs("j-old2")] == ["hello"]
    assert store.calibration() == {("llama", "A10G-24G"): (1.1, 3)}
    assert [j.id for j in store.list_jobs(owner="local")] == ["j-old1", "j-old2"]
    new = store.create_job(name="new", request={}, priority=1, now=10.0, owner="alice")
    assert [j.id for j in store.list_jobs(owner="alice")] == [new.id]
    store.close()
    SqlJobStore(url).close()  # a second start finds the schema current


def test_upgrade_from_the_pre_migration_schema_on_sqlite(tmp_path):
    check_upgrade_from_legacy(f"sqlite:///{tmp_path / 'old.db'}")


def test_a_new_store_is_built_by_the_migrations_and_equals_the_tables(tmp_path):
    store = SqlJobStore(f"sqlite:///{tmp_path / 'new.db'}")
    assert _schema_diff(store.engine) == []
    store.close()


def test_migrations_ship_as_package_data():
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    data = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    shipped = {p.relative_to(root / "src/frenzy/control").as_posix()
               for pattern in data["frenzy.control"] for p in (root / "src/frenzy/control").glob(pattern)}
    assert {"migrations/env.py", "migrations/script.py.mako", "migrations/versions/0001_initial.py",
            "migrations/versions/0002_users_tokens.py", "migrations/versions/0003_teams_quotas.py"} <= shipped


@pytest.mark.slow
def test_upgrade_from_the_pre_migration_schema_on_postgres(postgres_url):  # noqa: F811
    engine = sa.create_engine(postgres_url)
    with engine.begin() as conn:  # the module's database may hold the store test's tables
        conn.execute(sa.text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
    engine.dispose()
    check_upgrade_from_legacy(postgres_url)


def check_upgrade_from_users_tokens(url: str) -> None:
    """A store at 0002 (users, tokens, owned jobs) upgrades to teams with nothing lost."""
    engine = sa.create_engine(url)
    migrations.upgrade(engine, "0002_users_tokens")
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO frenzy_users (name, admin, created_at) VALUES ('alice', false, 1.0)"))
        conn.execute(sa.text("INSERT INTO frenzy_tokens (id, user_name, token_hash, created_at) "
                             "VALUES ('t-000000000001', 'alice', :h, 2.0)"), {"h": "a" * 64})
        conn.execute(sa.text(
            "INSERT INTO frenzy_jobs (id, name, state, request, priority, submitted_at, updated_at, plans, "
            "allocation, attempts, cancel_requested, failure_reason, progress, at_risk, owner) VALUES "
            "('j-1', 'one', 'running', '{}', 0, 1.0, 1.0, '[]', '[[\"n1\", 2]]', 1, false, '', '{}', false, "
            "'alice')"))
    engine.dispose()
    store = SqlJobStore(url)
    with store.engine.connect() as conn:
        assert migrations.current(conn) == "0003_teams_quotas"
    assert _schema_diff(store.engine) == []
    assert store.get_job("j-1").owner == "alice" and store.get_job("j-1").allocation == (("n1", 2),)
    assert [t.user for t in store.list_tokens()] == ["alice"]
    assert store.list_teams() == []
    store.set_team("vision", {"A100-SXM-80G": 8}, now=3.0)
    store.add_team_member("vision", "alice", now=3.0)
    assert [(t.name, t.quota, t.members) for t in store.list_teams()] == [("vision", {"A100-SXM-80G": 8}, ("alice",))]
    store.close()
    with sa.create_engine(url).begin() as conn:  # and back down: the teams' tables go, nothing else
        from alembic import command
        command.downgrade(migrations.config(conn), "0002_users_tokens")
        assert not sa.inspect(conn).has_table("frenzy_teams")
        assert conn.execute(sa.text("SELECT owner FROM frenzy_jobs")).scalar() == "alice"


def test_upgrade_from_users_and_tokens_on_sqlite(tmp_path):
    check_upgrade_from_users_tokens(f"sqlite:///{tmp_path / 'v2.db'}")


@pytest.mark.slow
def test_upgrade_from_users_and_tokens_on_postgres(postgres_url):  # noqa: F811
    engine = sa.create_engine(postgres_url)
    with engine.begin() as conn:
        conn.execute(sa.text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
    engine.dispose()
    check_upgrade_from_users_tokens(postgres_url)

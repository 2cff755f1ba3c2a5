"""Alembic migrations of the job store, shipped as package data and run by the store itself.

`upgrade(engine)` brings any database to the latest revision: a new one from nothing, one created by
a Frenzy from before migrations (its tables exist, but no `alembic_version`) by first stamping it at
the initial revision, which is exactly that schema. Operators never run Alembic by hand; a new
schema change is a new file in versions/ (`alembic revision` with script_location
`frenzy.control:migrations`, or by copying the latest one).
"""

from __future__ import annotations

import logging
from functools import lru_cache

import sqlalchemy as sa

SCRIPT_LOCATION = "frenzy.control:migrations"
# The schema `metadata.create_all` made before migrations existed.
INITIAL_REVISION = "0001_initial"
log = logging.getLogger("frenzy.store")


def config(connection=None):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", SCRIPT_LOCATION)
    cfg.attributes["connection"] = connection
    return cfg


@lru_cache(maxsize=1)
def head() -> str:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(config()).get_current_head()


def current(connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()


def upgrade(engine: sa.Engine, revision: str = "head") -> None:
    """Upgrade the store's schema to `revision` (a no-op when it is already there)."""
    alembic_log = logging.getLogger("alembic")
    if alembic_log.level == logging.NOTSET:  # one line of ours rather than Alembic's chatter
        alembic_log.setLevel(logging.WARNING)
    from alembic import command

    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":  # two servers starting at once: one migrates, one waits
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(7205912)"))
        now = current(conn)
        if revision == "head" and now == head():
            return
        cfg = config(conn)
        if now is None and sa.inspect(conn).has_table("frenzy_jobs"):
            command.stamp(cfg, INITIAL_REVISION)  # made by a Frenzy from before migrations
            now = f"{INITIAL_REVISION} (pre-migration store)"
        command.upgrade(cfg, revision)
        log.info("job store schema upgraded from %s to %s", now or "nothing", current(conn))

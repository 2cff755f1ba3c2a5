"""Alembic's entry point: runs on the connection `frenzy.control.migrations.upgrade` hands it."""

from alembic import context

from frenzy.control.store import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("Frenzy's migrations run from frenzy.control.migrations.upgrade(engine) (every store "
                       "open calls it), not from the alembic command line")
# render_as_batch: SQLite alters tables by copying them, which batch mode does for it.
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()

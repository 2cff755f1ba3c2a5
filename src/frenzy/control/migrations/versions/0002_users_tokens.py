"""Users and API tokens; every job gets an owner (existing jobs: the local default user).

Revision ID: 0002_users_tokens
Revises: 0001_initial
"""

import sqlalchemy as sa
from alembic import op

revision = "0002_users_tokens"
down_revision = "0001_initial"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "frenzy_users",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("admin", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_table(
        "frenzy_tokens",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("user_name", sa.String(64), sa.ForeignKey("frenzy_users.name"), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("revoked_at", sa.Float),
    )
    op.create_index("ix_frenzy_tokens_user_name", "frenzy_tokens", ["user_name"])
    # "local" is frenzy.control.records.LOCAL_USER, spelled out: a migration must not change with the code.
    with op.batch_alter_table("frenzy_jobs") as batch:
        batch.add_column(sa.Column("owner", sa.String(64), nullable=False, server_default="local"))
        batch.create_index("ix_frenzy_jobs_owner", ["owner"])


def downgrade() -> None:
    with op.batch_alter_table("frenzy_jobs") as batch:
        batch.drop_index("ix_frenzy_jobs_owner")
        batch.drop_column("owner")
    op.drop_table("frenzy_tokens")
    op.drop_table("frenzy_users")

"""Teams with a nominal GPU quota per type, and their members (a user is in at most one team).

Revision ID: 0003_teams_quotas
Revises: 0002_users_tokens
"""

import sqlalchemy as sa
from alembic import op

revision = "0003_teams_quotas"
down_revision = "0002_users_tokens"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "frenzy_teams",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("quota", sa.JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_table(
        "frenzy_team_members",
        sa.Column("user_name", sa.String(64), primary_key=True),
        sa.Column("team", sa.String(64), sa.ForeignKey("frenzy_teams.name"), nullable=False),
        sa.Column("added_at", sa.Float, nullable=False),
    )
    op.create_index("ix_frenzy_team_members_team", "frenzy_team_members", ["team"])


def downgrade() -> None:
    op.drop_index("ix_frenzy_team_members_team", "frenzy_team_members")
    op.drop_table("frenzy_team_members")
    op.drop_table("frenzy_teams")

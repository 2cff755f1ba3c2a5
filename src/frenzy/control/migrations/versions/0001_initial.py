"""The job store as `metadata.create_all` built it before migrations: jobs, attempts, logs, calibration.

Revision ID: 0001_initial
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001_initial"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "frenzy_jobs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
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
        sa.Column("finished_at", sa.Float),
    )
    op.create_index("ix_frenzy_jobs_state", "frenzy_jobs", ["state"])
    op.create_table(
        "frenzy_attempts",
        sa.Column("job_id", sa.String(32), sa.ForeignKey("frenzy_jobs.id"), primary_key=True),
        sa.Column("number", sa.Integer, primary_key=True),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("choice", sa.JSON, nullable=False),
        sa.Column("allocation", sa.JSON, nullable=False),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("ended_at", sa.Float),
        sa.Column("error", sa.Text, nullable=False),
        sa.Column("observed_peak_bytes", sa.JSON, nullable=False),
        sa.Column("observed_source", sa.String(16), nullable=False),
    )
    op.create_table(
        "frenzy_logs",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(32), nullable=False),
        sa.Column("ts", sa.Float, nullable=False),
        sa.Column("line", sa.Text, nullable=False),
    )
    op.create_index("ix_frenzy_logs_job_id", "frenzy_logs", ["job_id"])
    op.create_table(
        "frenzy_calibration",
        sa.Column("family", sa.String(64), primary_key=True),
        sa.Column("gpu_type", sa.String(64), primary_key=True),
        sa.Column("factor", sa.Float, nullable=False),
        sa.Column("samples", sa.Integer, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    for table in ("frenzy_calibration", "frenzy_logs", "frenzy_attempts", "frenzy_jobs"):
        op.drop_table(table)

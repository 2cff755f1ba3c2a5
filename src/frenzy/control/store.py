"""The durable job store on SQLAlchemy: SQLite (WAL) by default, PostgreSQL by URL.

Every state change goes through `transition`, which checks the state machine inside the same
transaction that writes it, so a crash never leaves a job in a state the machine cannot reach.
The schema is Alembic-managed (frenzy/control/migrations): opening a store upgrades it to the latest
revision, and the tables below must equal what the migrations build (a unit test compares them).
A SQLite file is created private (0600, in a 0700 folder): it holds every job and the token hashes.
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable

import sqlalchemy as sa
from sqlalchemy import event

from frenzy.control.records import LOCAL_USER, AttemptRecord, JobRecord, TokenRecord
from frenzy.control.states import AttemptOutcome, JobState, check_transition
from frenzy.control.sqlite_file import private_sqlite_file
from frenzy.control.teams import TeamStoreMixin, declare_tables

DEFAULT_DB_PATH = Path("~/.frenzy/frenzy.db")
DB_URL_ENV = "FRENZY_DB_URL"

metadata = sa.MetaData()
jobs = sa.Table(
    "frenzy_jobs", metadata,
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
    sa.Column("finished_at", sa.Float),
    sa.Column("owner", sa.String(64), nullable=False, server_default=LOCAL_USER, index=True),
)
attempts = sa.Table(
    "frenzy_attempts", metadata,
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
logs = sa.Table(
    "frenzy_logs", metadata,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("job_id", sa.String(32), nullable=False, index=True),
    sa.Column("ts", sa.Float, nullable=False),
    sa.Column("line", sa.Text, nullable=False),
)
calibration = sa.Table(
    "frenzy_calibration", metadata,
    sa.Column("family", sa.String(64), primary_key=True),
    sa.Column("gpu_type", sa.String(64), primary_key=True),
    sa.Column("factor", sa.Float, nullable=False),
    sa.Column("samples", sa.Integer, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)
users = sa.Table(
    "frenzy_users", metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("admin", sa.Boolean, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)
tokens = sa.Table(
    "frenzy_tokens", metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("user_name", sa.String(64), sa.ForeignKey("frenzy_users.name"), nullable=False, index=True),
    sa.Column("token_hash", sa.String(64), nullable=False),  # sha256 hex of the secret part
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("revoked_at", sa.Float),
)
teams, team_members = declare_tables(metadata)  # frenzy.control.teams


def default_url() -> str:
    """FRENZY_DB_URL if set (e.g. postgresql+psycopg://user@host/db), else SQLite in ~/.frenzy."""
    url = os.environ.get(DB_URL_ENV)
    if url:
        return url
    return f"sqlite:///{DEFAULT_DB_PATH.expanduser()}"


def open_error(db_url: str | None, exc: Exception) -> str:
    """One line for a store that could not be opened (a bad URL, no database there, no driver, a
    file that is no store), naming the URL without its password."""
    reason = " ".join(str(getattr(exc, "orig", None) or exc).split()).split(" (Background on")[0]
    try:
        shown = sa.engine.make_url(db_url or default_url()).render_as_string(hide_password=True)
    except sa.exc.SQLAlchemyError:
        shown = "given"
    return f"cannot open the job store {shown} ({type(exc).__name__}: {reason})"


def _sqlite_pragmas(dbapi_conn, _record):
    # WAL lets the API read while the loop writes; busy_timeout rides out the short write locks.
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=10000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def _pairs(value) -> tuple[tuple[str, int], ...]:
    return tuple((str(n), int(g)) for n, g in (value or ()))


class UnknownJobError(KeyError):
    def __init__(self, job_id: str):
        super().__init__(job_id)
        self.job_id = job_id

    def __str__(self) -> str:
        return f"no job '{self.job_id}'; list jobs with `frenzy jobs` or GET /v1/jobs"


class SqlJobStore(TeamStoreMixin):
    """JobStore on any SQLAlchemy URL. Thread-safe: each call uses its own connection."""

    def __init__(self, url: str | None = None):
        from frenzy.control.migrations import upgrade

        self.url = url or default_url()
        kwargs: dict[str, Any] = {}
        if self.url.startswith("sqlite"):
            private_sqlite_file(self.url, DEFAULT_DB_PATH.expanduser().parent)
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
        self.engine = sa.create_engine(self.url, **kwargs)
        # SQLite has one writer at a time, and a writer that finds the lock taken sleeps in growing steps
        # (its busy handler): under many concurrent submits that made a slow tail. Writers of this process
        # queue on a lock instead; readers are not held (WAL), nor is PostgreSQL.
        self._writers = threading.RLock() if self.url.startswith("sqlite") else contextlib.nullcontext()
        if self.url.startswith("sqlite"):
            event.listen(self.engine, "connect", _sqlite_pragmas)
        upgrade(self.engine)

    @contextlib.contextmanager
    def _begin(self):
        with self._writers, self.engine.begin() as conn:
            yield conn

    def close(self) -> None:
        self.engine.dispose()

    # ---- jobs -----------------------------------------------------------------------------

    def create_job(self, *, name: str, request: dict, priority: int, now: float,
                   plans: Iterable[dict] = (), owner: str = LOCAL_USER) -> JobRecord:
        job_id = "j-" + uuid.uuid4().hex[:10]
        row = dict(id=job_id, name=name, owner=owner, state=JobState.QUEUED.value, request=request, priority=priority,
                   submitted_at=now, updated_at=now, plans=list(plans), chosen=None, allocation=[],
                   attempts=0, cancel_requested=False, failure_reason="", progress={}, at_risk=False,
                   placed_at=None, started_at=None, finished_at=None)
        with self._begin() as conn:
            conn.execute(jobs.insert().values(**row))
        return self.get_job(job_id)

    def get_job(self, job_id: str) -> JobRecord:
        with self.engine.connect() as conn:
            row = conn.execute(jobs.select().where(jobs.c.id == job_id)).mappings().first()
        if row is None:
            raise UnknownJobError(job_id)
        return _job(row)

    def list_jobs(self, states: Iterable[JobState] | None = None, limit: int | None = None, *,
                  light: bool = False, cancel_requested: bool | None = None,
                  owner: str | None = None) -> list[JobRecord]:
        """Jobs in submission order (only `owner`'s if given). `light` skips the JSON columns (request,
        plans, chosen, progress): the loop's per-step scans of a long queue need only states and allocations."""
        columns = [c for c in jobs.c if c.name not in _HEAVY] if light else [jobs]
        query = sa.select(*columns).order_by(jobs.c.submitted_at, jobs.c.id)
        if states is not None:
            query = query.where(jobs.c.state.in_([s.value for s in states]))
        if cancel_requested is not None:
            query = query.where(jobs.c.cancel_requested == cancel_requested)
        if owner is not None:
            query = query.where(jobs.c.owner == owner)
        if limit is not None:
            query = query.limit(limit)
        with self.engine.connect() as conn:
            return [_job(r) for r in conn.execute(query).mappings()]

    def count_by_state(self) -> dict[JobState, int]:
        query = sa.select(jobs.c.state, sa.func.count()).group_by(jobs.c.state)
        with self.engine.connect() as conn:
            counts = {JobState(s): n for s, n in conn.execute(query)}
        return {s: counts.get(s, 0) for s in JobState}

    def transition(self, job_id: str, target: JobState, *, now: float, **fields) -> JobRecord:
        """Move a job to `target` (checked against the state machine) and set other columns."""
        with self._begin() as conn:
            row = conn.execute(jobs.select().where(jobs.c.id == job_id).with_for_update()).mappings().first()
            if row is None:
                raise UnknownJobError(job_id)
            check_transition(job_id, JobState(row["state"]), target)
            values = _columns(fields)
            values.update(state=target.value, updated_at=now)
            conn.execute(jobs.update().where(jobs.c.id == job_id).values(**values))
        return self.get_job(job_id)

    def update_job(self, job_id: str, *, now: float, **fields) -> None:
        """Set non-state columns (progress, flags)."""
        if "state" in fields:
            raise ValueError("change a job's state with transition(), which checks the state machine")
        with self._begin() as conn:
            result = conn.execute(jobs.update().where(jobs.c.id == job_id).values(**_columns(fields), updated_at=now))
            if result.rowcount == 0:
                raise UnknownJobError(job_id)

    def request_cancel(self, job_id: str, *, now: float) -> JobRecord:
        self.update_job(job_id, now=now, cancel_requested=True)
        return self.get_job(job_id)

    # ---- attempts -------------------------------------------------------------------------

    def add_attempt(self, attempt: AttemptRecord) -> None:
        with self._begin() as conn:
            conn.execute(attempts.insert().values(**_attempt_row(attempt)))

    def update_attempt(self, job_id: str, number: int, **fields) -> AttemptRecord:
        current = self.attempt(job_id, number)
        updated = replace(current, **fields)
        with self._begin() as conn:
            conn.execute(attempts.update().where((attempts.c.job_id == job_id) & (attempts.c.number == number))
                         .values(**_attempt_row(updated)))
        return updated

    def attempt(self, job_id: str, number: int) -> AttemptRecord:
        with self.engine.connect() as conn:
            row = conn.execute(attempts.select().where((attempts.c.job_id == job_id) & (attempts.c.number == number))
                               ).mappings().first()
        if row is None:
            raise KeyError(f"job {job_id} has no attempt {number}")
        return _attempt(row)

    def attempts(self, job_id: str) -> list[AttemptRecord]:
        with self.engine.connect() as conn:
            rows = conn.execute(attempts.select().where(attempts.c.job_id == job_id).order_by(attempts.c.number))
            return [_attempt(r) for r in rows.mappings()]

    # ---- logs -----------------------------------------------------------------------------

    def append_logs(self, job_id: str, lines: Iterable[str], *, now: float) -> None:
        rows = [dict(job_id=job_id, ts=now, line=line) for line in lines]
        if rows:
            with self._begin() as conn:
                conn.execute(logs.insert(), rows)

    def logs(self, job_id: str, after: int = 0, limit: int = 10_000) -> list[tuple[int, float, str]]:
        query = (sa.select(logs.c.seq, logs.c.ts, logs.c.line)
                 .where((logs.c.job_id == job_id) & (logs.c.seq > after)).order_by(logs.c.seq).limit(limit))
        with self.engine.connect() as conn:
            return [tuple(r) for r in conn.execute(query)]

    # ---- calibration ----------------------------------------------------------------------

    def calibration(self) -> dict[tuple[str, str], tuple[float, int]]:
        """(model family, GPU type) -> (correction factor, samples)."""
        with self.engine.connect() as conn:
            return {(r.family, r.gpu_type): (r.factor, r.samples) for r in conn.execute(calibration.select())}

    def put_calibration(self, family: str, gpu_type: str, factor: float, samples: int, *, now: float) -> None:
        key = (calibration.c.family == family) & (calibration.c.gpu_type == gpu_type)
        with self._begin() as conn:
            if conn.execute(calibration.update().where(key).values(factor=factor, samples=samples,
                                                                   updated_at=now)).rowcount == 0:
                conn.execute(calibration.insert().values(family=family, gpu_type=gpu_type, factor=factor,
                                                         samples=samples, updated_at=now))

    # ---- users and tokens (the token itself never reaches the store: frenzy.control.auth hashes it) --

    def add_token(self, *, token_id: str, user: str, token_hash: str, admin: bool | None, now: float) -> TokenRecord:
        """A token for `user`, created with the user if new. `admin` sets the user's role (None keeps it;
        a new user is not an admin unless asked)."""
        with self._begin() as conn:
            row = conn.execute(users.select().where(users.c.name == user).with_for_update()).mappings().first()
            if row is None:
                conn.execute(users.insert().values(name=user, admin=bool(admin), created_at=now))
            elif admin is not None and bool(row["admin"]) != admin:
                conn.execute(users.update().where(users.c.name == user).values(admin=admin))
            conn.execute(tokens.insert().values(id=token_id, user_name=user, token_hash=token_hash, created_at=now,
                                                revoked_at=None))
        return next(t for t in self.list_tokens(include_revoked=True) if t.id == token_id)

    def list_tokens(self, *, include_revoked: bool = False) -> list[TokenRecord]:
        query = (sa.select(tokens.c.id, tokens.c.user_name, users.c.admin, tokens.c.created_at, tokens.c.revoked_at)
                 .join(users, users.c.name == tokens.c.user_name).order_by(tokens.c.created_at, tokens.c.id))
        if not include_revoked:
            query = query.where(tokens.c.revoked_at.is_(None))
        with self.engine.connect() as conn:
            return [TokenRecord(id=r.id, user=r.user_name, admin=bool(r.admin), created_at=r.created_at,
                                revoked_at=r.revoked_at) for r in conn.execute(query)]

    def token_hash(self, token_id: str) -> tuple[TokenRecord, str] | None:
        """The active token `token_id` and its stored hash, or None (unknown or revoked)."""
        query = (sa.select(tokens.c.id, tokens.c.user_name, users.c.admin, tokens.c.created_at, tokens.c.token_hash)
                 .join(users, users.c.name == tokens.c.user_name)
                 .where((tokens.c.id == token_id) & tokens.c.revoked_at.is_(None)))
        with self.engine.connect() as conn:
            r = conn.execute(query).first()
        if r is None:
            return None
        return TokenRecord(id=r.id, user=r.user_name, admin=bool(r.admin), created_at=r.created_at), r.token_hash

    def revoke_token(self, token_id: str, *, now: float) -> bool:
        """True if an active token was revoked."""
        with self._begin() as conn:
            return conn.execute(tokens.update().where((tokens.c.id == token_id) & tokens.c.revoked_at.is_(None))
                                .values(revoked_at=now)).rowcount > 0

    def has_tokens(self) -> bool:
        """Whether any token is active: then every request must authenticate, even on loopback."""
        with self.engine.connect() as conn:
            return conn.execute(sa.select(tokens.c.id).where(tokens.c.revoked_at.is_(None)).limit(1)).first() is not None


_JSON_PAIRS = ("allocation",)
_HEAVY = ("request", "plans", "chosen", "progress")


def _columns(fields: dict) -> dict:
    out = {}
    for key, value in fields.items():
        if key not in jobs.c:
            raise ValueError(f"unknown job column '{key}'")
        if key in _JSON_PAIRS:
            value = [list(p) for p in value]
        elif key == "owner":
            raise ValueError("a job's owner is set when it is created and never changes")
        elif key == "plans":
            value = list(value)
        out[key] = value
    return out


def _job(row) -> JobRecord:
    return JobRecord(id=row["id"], name=row["name"], state=JobState(row["state"]), request=row.get("request") or {},
                     priority=row["priority"], submitted_at=row["submitted_at"], updated_at=row["updated_at"],
                     plans=tuple(row.get("plans") or ()), chosen=row.get("chosen"), allocation=_pairs(row["allocation"]),
                     attempts=row["attempts"], cancel_requested=bool(row["cancel_requested"]),
                     failure_reason=row["failure_reason"], progress=dict(row.get("progress") or {}),
                     at_risk=bool(row["at_risk"]), placed_at=row["placed_at"], started_at=row["started_at"],
                     finished_at=row["finished_at"], owner=row["owner"])


def _attempt_row(a: AttemptRecord) -> dict:
    return dict(job_id=a.job_id, number=a.number, outcome=a.outcome.value, choice=a.choice,
                allocation=[list(p) for p in a.allocation], started_at=a.started_at, ended_at=a.ended_at,
                error=a.error, observed_peak_bytes=list(a.observed_peak_bytes), observed_source=a.observed_source)


def _attempt(row) -> AttemptRecord:
    return AttemptRecord(job_id=row["job_id"], number=row["number"], outcome=AttemptOutcome(row["outcome"]),
                         choice=row["choice"], allocation=_pairs(row["allocation"]), started_at=row["started_at"],
                         ended_at=row["ended_at"], error=row["error"],
                         observed_peak_bytes=tuple(int(b) for b in row["observed_peak_bytes"] or ()),
                         observed_source=row["observed_source"])


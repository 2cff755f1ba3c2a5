"""Teams and GPU quotas in the job store, and what the scheduler and the cluster view read from them.

A team has a nominal quota per GPU type (canonical catalog names) and members; a user is in at most
one team (the members table's key is the user). Users in no team share the default pool, which has
no quota and only borrows (frenzy.sched.quotas). With no team defined at all the scheduler runs
without quotas, as before teams existed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping

import sqlalchemy as sa

from frenzy.control.states import JobState
from frenzy.sched.quotas import DEFAULT_TEAM, Teams, borrowed_gpus, canonical_quota

TEAM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
DEFAULT_POOL = "(no team)"  # how the default pool is shown: not a valid team name, so never a team's


def declare_tables(metadata: sa.MetaData) -> tuple[sa.Table, sa.Table]:
    teams = sa.Table(
        "frenzy_teams", metadata,
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("quota", sa.JSON, nullable=False),  # canonical GPU type -> nominal GPUs
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    members = sa.Table(
        "frenzy_team_members", metadata,
        sa.Column("user_name", sa.String(64), primary_key=True),  # one team per user
        sa.Column("team", sa.String(64), sa.ForeignKey("frenzy_teams.name"), nullable=False, index=True),
        sa.Column("added_at", sa.Float, nullable=False),
    )
    return teams, members


@dataclass(frozen=True, slots=True, kw_only=True)
class TeamRecord:
    name: str
    quota: dict[str, int] = field(hash=False)
    members: tuple[str, ...] = ()


class TeamConflictError(ValueError):
    """A membership that would put a user in two teams (409)."""


class NotAMemberError(LookupError):
    """Removing a user from a team they are not in (404)."""


class UnknownTeamError(KeyError):
    def __init__(self, name: str, known: Iterable[str]):
        import difflib

        known = sorted(known)
        close = difflib.get_close_matches(name, known, n=3)
        hint = f" Did you mean: {', '.join(close)}?" if close else (
            f" Teams: {', '.join(known)}." if known else " There are no teams yet.")
        super().__init__(f"no team '{name}'.{hint} Create it with `frenzy team set {name} --quota TYPE=GPUS`")

    def __str__(self) -> str:
        return self.args[0]


def check_team_name(name: str) -> str:
    if not isinstance(name, str) or not TEAM_NAME.match(name):
        raise ValueError(f"team name {name!r} is not valid: use 1-64 letters, digits, '.', '_', '@' or '-', "
                         "starting with a letter or digit")
    return name


class TeamStoreMixin:
    """Team methods of SqlJobStore (frenzy.control.store), kept here to keep that module small."""

    def _team_tables(self) -> tuple[sa.Table, sa.Table]:
        from frenzy.control.store import team_members, teams

        return teams, team_members

    def set_team(self, name: str, quota: Mapping, *, now: float) -> TeamRecord:
        """Create the team or replace its quota."""
        check_team_name(name)
        quota = canonical_quota(quota)
        teams, _ = self._team_tables()
        try:
            with self._begin() as conn:
                if conn.execute(teams.update().where(teams.c.name == name)
                                .values(quota=quota, updated_at=now)).rowcount == 0:
                    conn.execute(teams.insert().values(name=name, quota=quota, created_at=now, updated_at=now))
                return self._written_team(conn, name)
        except sa.exc.IntegrityError:  # created meanwhile by another request: this quota replaces it
            with self._begin() as conn:
                if conn.execute(teams.update().where(teams.c.name == name)
                                .values(quota=quota, updated_at=now)).rowcount == 0:  # and deleted since
                    conn.execute(teams.insert().values(name=name, quota=quota, created_at=now, updated_at=now))
                return self._written_team(conn, name)

    def delete_team(self, name: str) -> None:
        """Remove the team; its members go back to the default pool."""
        teams, members = self._team_tables()
        with self._begin() as conn:
            conn.execute(members.delete().where(members.c.team == name))
            if conn.execute(teams.delete().where(teams.c.name == name)).rowcount == 0:
                raise UnknownTeamError(name, self._team_names(conn))

    def add_team_member(self, team: str, user: str, *, now: float) -> TeamRecord:
        from frenzy.control.auth import check_user_name

        check_user_name(user)
        teams, members = self._team_tables()
        with self._begin() as conn:
            if conn.execute(teams.select().where(teams.c.name == team)).first() is None:
                raise UnknownTeamError(team, self._team_names(conn))
            current = conn.execute(sa.select(members.c.team).where(members.c.user_name == user)
                                   .with_for_update()).scalar()
            if current is not None and current != team:
                raise TeamConflictError(f"user {user} is in team {current} (a user is in one team); remove them "
                                        f"first: `frenzy team remove-user {current} {user}`")
            if current is None:
                try:
                    with conn.begin_nested():
                        conn.execute(members.insert().values(user_name=user, team=team, added_at=now))
                except sa.exc.IntegrityError:  # put in a team by another request meanwhile, or the team deleted
                    raise TeamConflictError(f"user {user} was just put in a team, or team {team} removed, by another "
                                            "request; see `frenzy team list` and try again") from None
            return self._written_team(conn, team)

    def remove_team_member(self, team: str, user: str) -> TeamRecord:
        _, members = self._team_tables()
        with self._begin() as conn:
            gone = conn.execute(members.delete().where((members.c.team == team) & (members.c.user_name == user)))
            record = self._written_team(conn, team)  # an unknown team says so
        if gone.rowcount == 0:
            raise NotAMemberError(f"user {user} is not in team {team}; `frenzy team list` shows the members")
        return record

    def team(self, name: str) -> TeamRecord:
        with self.engine.connect() as conn:
            return self._written_team(conn, name)

    def list_teams(self) -> list[TeamRecord]:
        with self.engine.connect() as conn:
            return self._read_teams(conn)

    def _read_teams(self, conn, name: str | None = None) -> list[TeamRecord]:
        """Every team (or the one named) as `conn` sees it: a write answers with what it wrote, not
        with what a concurrent request (a delete) left after it committed."""
        teams, members = self._team_tables()
        chosen, people = teams.select().order_by(teams.c.name), sa.select(members.c.team, members.c.user_name)
        if name is not None:
            chosen, people = chosen.where(teams.c.name == name), people.where(members.c.team == name)
        rows = conn.execute(chosen).mappings().all()
        users: dict[str, list[str]] = {}
        for r in conn.execute(people.order_by(members.c.user_name)):
            users.setdefault(r.team, []).append(r.user_name)
        return [TeamRecord(name=r["name"], quota={g: int(n) for g, n in (r["quota"] or {}).items()},
                           members=tuple(users.get(r["name"], ()))) for r in rows]

    def _written_team(self, conn, name: str) -> TeamRecord:
        found = self._read_teams(conn, name)
        if not found:
            raise UnknownTeamError(name, self._team_names(conn))
        return found[0]

    def _team_names(self, conn) -> list[str]:
        teams, _ = self._team_tables()
        return list(conn.execute(sa.select(teams.c.name)).scalars())


def teams_for_jobs(records: list[TeamRecord], owners: Mapping[str, str]) -> Teams | None:
    """The scheduler's Teams for jobs (job id -> owner); None when no team exists (no quotas)."""
    if not records:
        return None
    team_of_user = {user: t.name for t in records for user in t.members}
    return Teams(quotas={t.name: t.quota for t in records},
                 team_of={job: team_of_user.get(owner, DEFAULT_TEAM) for job, owner in owners.items()})


def team_usage(store, gpu_type_of_node: Mapping[str, str]) -> dict[str, dict[str, dict[str, int]]]:
    """Per team (the default pool as DEFAULT_POOL), per GPU type: quota, used, borrowed GPUs. Used
    counts the GPUs of placed and running jobs, by their owner's team."""
    records = store.list_teams()
    team_of_user = {user: t.name for t in records for user in t.members}
    used: dict[str, dict[str, int]] = {}
    for job in store.list_jobs([JobState.PLACED, JobState.RUNNING], light=True):
        row = used.setdefault(team_of_user.get(job.owner, DEFAULT_TEAM), {})
        for node, gpus in job.allocation:
            gpu = gpu_type_of_node.get(node)
            if gpu is not None:
                row[gpu] = row.get(gpu, 0) + gpus
    out: dict[str, dict[str, dict[str, int]]] = {}
    quotas = {t.name: t.quota for t in records}
    for team in [*quotas, *(t for t in used if t not in quotas)]:
        quota, mine = quotas.get(team, {}), used.get(team, {})
        out[team or DEFAULT_POOL] = {
            gpu: {"quota": quota.get(gpu, 0), "used": mine.get(gpu, 0),
                  "borrowed": borrowed_gpus(mine.get(gpu, 0), quota.get(gpu, 0))}
            for gpu in sorted({*quota, *mine})}
    return out

"""The teams API: admins set quotas and membership (everyone else gets a 403 saying who may).

    GET    /v1/teams                        every team, its quota and members
    PUT    /v1/teams/{team}                 {"quota": {"H100": 8, "A10G": 4}}: create, or replace the quota
    DELETE /v1/teams/{team}                 its members go back to the default pool
    PUT    /v1/teams/{team}/members/{user}  a user is in at most one team (409 if in another)
    DELETE /v1/teams/{team}/members/{user}
"""

from __future__ import annotations

from typing import Annotated, Callable

from fastapi import Depends, FastAPI, HTTPException, Path
from fastapi.responses import JSONResponse
from pydantic import Field, StrictInt, StringConstraints

from frenzy.control import schemas as s
from frenzy.control.schemas import TeamOut
from frenzy.control.auth import USER_NAME, Principal
from frenzy.control.teams import TEAM_NAME, NotAMemberError, TeamConflictError, TeamRecord, UnknownTeamError
from frenzy.sched.quotas import MAX_QUOTA_GPUS, MAX_QUOTA_TYPES

GpuName = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=s.PRINTABLE)]
Gpus = Annotated[StrictInt, Field(ge=0, le=MAX_QUOTA_GPUS)]
TeamName = Annotated[str, Path(max_length=64, pattern=TEAM_NAME.pattern, description="1-64 letters, digits, "
                                                                                     "'.', '_', '@' or '-', starting "
                                                                                     "with a letter or digit")]
UserName = Annotated[str, Path(max_length=64, pattern=USER_NAME.pattern, description="a user name")]
TEAM_ERRORS = {401: {"model": s.ErrorOut, "description": "no token, or not a valid one"},
               403: {"model": s.ErrorOut, "description": "not an admin"}, 404: {"model": s.ErrorOut},
               409: {"model": s.ErrorOut}, 422: {"model": s.ErrorOut}}
ADMINS_ONLY = ("teams and quotas are set by an admin; ask one, or use an admin's token "
               "(`frenzy token create --user NAME --admin` on the server machine)")


class TeamIn(s.StrictIn):
    quota: dict[GpuName, Gpus] = Field(max_length=MAX_QUOTA_TYPES, description=(
        f"GPU type (catalog name or alias, `frenzy gpus`) -> nominal GPUs, 0..{MAX_QUOTA_GPUS:,}; at most "
        f"{MAX_QUOTA_TYPES} types"), json_schema_extra={"examples": [{"H100": 8, "A10G": 4}]})


def _out(team: TeamRecord) -> TeamOut:
    return TeamOut(name=team.name, quota=team.quota, members=list(team.members))


def register_team_routes(app: FastAPI, service, user: Callable[..., Principal]) -> None:
    """Add the routes and their errors to `app`; `user` is the app's authentication dependency."""
    store = service.store

    def admin(who: Principal = Depends(user)) -> Principal:
        if not who.admin:
            raise HTTPException(status_code=403, detail=ADMINS_ONLY)
        return who

    route = dict(responses=TEAM_ERRORS, dependencies=[Depends(admin)], tags=["teams"])

    @app.get("/v1/teams", response_model=list[TeamOut], **route)
    def list_teams() -> list[TeamOut]:
        """Every team: its nominal quota per GPU type and its members (admins only)."""
        return [_out(t) for t in store.list_teams()]

    @app.put("/v1/teams/{team}", response_model=TeamOut, **route)
    def set_team(team: TeamName, body: TeamIn) -> TeamOut:
        """Create the team, or replace its quota. GPU types are checked against the catalog."""
        return _out(store.set_team(team, body.quota, now=service.clock.now()))

    @app.delete("/v1/teams/{team}", response_model=TeamOut, **route)
    def delete_team(team: TeamName) -> TeamOut:
        """Remove the team; its members' jobs go on in the default pool (no quota, borrow only)."""
        gone = store.team(team)
        store.delete_team(team)
        return _out(gone)

    @app.put("/v1/teams/{team}/members/{user_name}", response_model=TeamOut, **route)
    def add_member(team: TeamName, user_name: UserName) -> TeamOut:
        """Put a user in the team (409 if they are in another: a user is in at most one team)."""
        return _out(store.add_team_member(team, user_name, now=service.clock.now()))

    @app.delete("/v1/teams/{team}/members/{user_name}", response_model=TeamOut, **route)
    def remove_member(team: TeamName, user_name: UserName) -> TeamOut:
        return _out(store.remove_team_member(team, user_name))

    def reply(status):
        return lambda _req, exc: JSONResponse(status_code=status, content=s.ErrorOut(
            detail=str(exc), errors=[{"loc": [], "msg": str(exc)}]).model_dump())

    app.add_exception_handler(UnknownTeamError, reply(404))
    app.add_exception_handler(NotAMemberError, reply(404))
    app.add_exception_handler(TeamConflictError, reply(409))

"""`frenzy team set | add-user | remove-user | delete | list`: teams and GPU quotas (admins, via the API).

    frenzy team set vision --quota H100=8 --quota A10G=4
    frenzy team add-user vision alice
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from frenzy.cli.output import Json, console, emit
from frenzy.cli.serve import Url
from frenzy.cli.serve import _call as _checked

team_app = typer.Typer(help="Teams and their GPU quotas (an admin's token; see docs/SERVING.md, \"Teams and "
                            "quotas\").", no_args_is_help=True)


def _client(url):
    from frenzy.cli.client import Client

    return Client(url)


def _call(url, method: str, *parts: str, **kwargs):
    """The API's answer to METHOD /v1/<parts>; each part one path segment (client.api_path)."""
    from frenzy.cli.client import api_path

    return _checked(lambda: _client(url)._call(method, api_path(*parts), **kwargs))


def parse_quotas(items: list[str]) -> dict[str, int]:
    """["H100=8", "A10G=4"] -> {"H100": 8, "A10G": 4}; the server checks the names and bounds."""
    out: dict[str, int] = {}
    for item in items:
        name, sep, count = item.partition("=")
        if not sep or not name.strip() or not count.strip().isdigit():
            raise typer.BadParameter(f"'{item}': write TYPE=GPUS, e.g. --quota H100=8 (GPUS a whole number >= 0)",
                                     param_hint="--quota")
        out[name.strip()] = int(count)
    return out


def _show(team: dict, as_json: bool) -> None:
    if as_json:
        emit(team)
        return
    quota = ", ".join(f"{g}={n}" for g, n in team["quota"].items()) or "none"
    console.print(f"team {team['name']}: quota {quota}; members: {', '.join(team['members']) or 'none'}")


@team_app.command("set")
def set_(name: Annotated[str, typer.Argument(help="the team")],
         quota: Annotated[list[str] | None, typer.Option(
             "--quota", metavar="TYPE=GPUS", help="nominal GPUs of a type, repeatable (e.g. H100=8); the quota is "
                                                  "replaced by exactly these")] = None,
         url: Url = None, as_json: Json = False) -> None:
    """Create a team or replace its quota."""
    _show(_call(url, "PUT", "teams", name, answer="TeamOut", json={"quota": parse_quotas(quota or [])}), as_json)


@team_app.command("add-user")
def add_user(name: Annotated[str, typer.Argument(help="the team")],
             user: Annotated[str, typer.Argument(help="the user (a user is in at most one team)")],
             url: Url = None, as_json: Json = False) -> None:
    """Put a user in a team: their jobs count against its quota."""
    _show(_call(url, "PUT", "teams", name, "members", user, answer="TeamOut"), as_json)


@team_app.command("remove-user")
def remove_user(name: Annotated[str, typer.Argument(help="the team")],
                user: Annotated[str, typer.Argument(help="the user")], url: Url = None, as_json: Json = False) -> None:
    """Take a user out of a team: their jobs go on in the default pool (no quota, borrow only)."""
    _show(_call(url, "DELETE", "teams", name, "members", user, answer="TeamOut"), as_json)


@team_app.command("delete")
def delete(name: Annotated[str, typer.Argument(help="the team")], url: Url = None, as_json: Json = False) -> None:
    """Remove a team; its members go back to the default pool."""
    _show(_call(url, "DELETE", "teams", name, answer="TeamOut"), as_json)


@team_app.command("list")
def list_(url: Url = None, as_json: Json = False) -> None:
    """Teams, members, and per GPU type the quota and what they use now (used, borrowed beyond the quota)."""
    teams = _call(url, "GET", "teams", answer="TeamOut", many=True)
    usage = _call(url, "GET", "cluster", answer="ClusterOut")["teams"]
    if as_json:
        emit({"teams": teams, "usage": usage})
        return
    members = {t["name"]: ", ".join(t["members"]) for t in teams}
    rows = {t["name"]: usage.get(t["name"]) or {g: {"quota": n, "used": 0, "borrowed": 0}
                                                for g, n in t["quota"].items()} for t in teams}
    rows.update({team: r for team, r in usage.items() if team not in rows})  # the default pool
    console.print(team_table(rows, members))


def team_table(usage: dict, members: dict | None = None) -> Table | None:
    """Per team and GPU type: quota, used, borrowed (None without teams); `frenzy cluster` shows it too."""
    if not usage:
        return None
    table = Table("team", *(["members"] if members is not None else []), "GPU type", "quota", "used", "borrowed")
    for team, types in usage.items():
        for i, (gpu, row) in enumerate(sorted(types.items()) or [("-", {"quota": 0, "used": 0, "borrowed": 0})]):
            who = [] if members is None else [members.get(team, "") if i == 0 else ""]
            table.add_row(team if i == 0 else "", *who, gpu, str(row["quota"]), str(row["used"]), str(row["borrowed"]))
    return table


def register(app: typer.Typer) -> None:
    app.add_typer(team_app, name="team")

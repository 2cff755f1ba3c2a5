"""`frenzy token create | list | revoke` (operator, on the server machine) and `frenzy login` (user).

Token commands open the job store directly (`--db-url`, default $FRENZY_DB_URL or the SQLite file in
~/.frenzy), not an admin API: the first token cannot come from an API that needs one, and whoever can
open the store is the operator anyway. A token is printed once; the store keeps only its hash.
"""

from __future__ import annotations

import time
from typing import Annotated, Optional

import typer
from rich.table import Table

from frenzy.cli.output import Json, console, emit, fail
from frenzy.cli.serve import Url

token_app = typer.Typer(help="API tokens (run on the server machine: they are written to the job store).",
                        no_args_is_help=True)
HOW_TO_NAME_A_STORE = ("pass --db-url sqlite:///PATH or postgresql://USER@HOST/DB (the server's), or set "
                       "FRENZY_DB_URL")
DbUrl = Annotated[Optional[str], typer.Option(help="the server's job store (default $FRENZY_DB_URL or sqlite "
                                                   "~/.frenzy/frenzy.db)")]


def _store(db_url):
    """The job store, or one line saying why it cannot be opened (a bad URL, no database there, no driver)."""
    from sqlalchemy.exc import SQLAlchemyError

    from frenzy.control.store import SqlJobStore, open_error

    try:
        return SqlJobStore(db_url)
    except (SQLAlchemyError, ImportError, OSError) as exc:
        raise fail(open_error(db_url, exc), HOW_TO_NAME_A_STORE) from None


@token_app.command("create")
def create(user: Annotated[str, typer.Option(help="the user the token authenticates (created if new)")],
           admin: Annotated[Optional[bool], typer.Option(
               "--admin/--no-admin", help="make the user an admin (sees and cancels every job) or not; "
                                         "default: a new user is not, an existing one keeps its role")] = None,
           as_json: Json = False, db_url: DbUrl = None) -> None:
    """Create a token for USER and print it (once: only its hash is stored)."""
    from frenzy.control.auth import create_token

    store = _store(db_url)
    try:
        record, token = create_token(store, user, admin=admin)
    except ValueError as exc:
        raise fail(str(exc)) from None
    finally:
        store.close()
    if as_json:
        emit({"token": token, "id": record.id, "user": record.user, "admin": record.admin})
        return
    typer.echo(token)
    typer.echo(f"token {record.id} for {record.user}{' (admin)' if record.admin else ''}; it is shown only "
               "now. The user runs `frenzy login --token ...` or sets FRENZY_TOKEN.", err=True)


@token_app.command("list")
def list_(all_: Annotated[bool, typer.Option("--all", help="revoked tokens too")] = False,
          as_json: Json = False, db_url: DbUrl = None) -> None:
    """Tokens: id, user, role, created, revoked (never the token)."""
    store = _store(db_url)
    try:
        rows = store.list_tokens(include_revoked=all_)
    finally:
        store.close()
    if as_json:  # times as Unix seconds (null: not revoked)
        emit({"tokens": [{"id": t.id, "user": t.user, "admin": t.admin, "created_at": t.created_at,
                          "revoked_at": t.revoked_at} for t in rows]})
        return
    table = Table("id", "user", "role", "created", "revoked")
    for t in rows:
        table.add_row(t.id, t.user, "admin" if t.admin else "user", _when(t.created_at), _when(t.revoked_at))
    console.print(table)


@token_app.command("revoke")
def revoke(token_id: Annotated[str, typer.Argument(help="the token's id (`frenzy token list`)")],
           as_json: Json = False, db_url: DbUrl = None) -> None:
    """Revoke a token: the next request that sends it gets a 401."""
    store = _store(db_url)
    try:
        revoked = store.revoke_token(token_id, now=time.time())
    finally:
        store.close()
    if not revoked:
        raise fail(f"no active token '{token_id}'; see `frenzy token list --all`")
    if as_json:
        emit({"revoked": token_id})
        return
    console.print(f"revoked {token_id}")


def login(token: Annotated[Optional[str], typer.Option(help="the token `frenzy token create` printed "
                                                            "(asked for, unechoed, when left out)")] = None,
          as_json: Json = False, url: Url = None) -> None:
    """Save a token in ~/.frenzy/credentials (0600) for the frenzy commands, and check it with the server.

    --json: {"credentials": path, "checked": the server answered, "accepted": it took the token}."""
    from frenzy.cli.client import ApiError, Client, check_token, write_credentials

    if token is None:
        token = typer.prompt("token", hide_input=True, err=True)
    token = token.strip()
    if not token:
        raise fail("the token is empty; pass the one `frenzy token create` printed")
    try:  # never saved: no request could send it
        check_token(token)
    except ApiError as exc:
        raise fail(exc.detail) from None
    try:
        path = write_credentials(token)
    except OSError as exc:
        raise fail(f"cannot write the credentials file ({exc}); set FRENZY_CREDENTIALS to a writable path") from None
    try:
        Client(url, token=token).jobs()
    except ApiError as exc:
        if exc.status == 0:
            _logged_in(as_json, path, f"not checked: {exc.detail}", checked=False, accepted=None)
            return
        raise fail(f"the server refused the token: {exc.detail}", "check it, or ask for a new one with "
                   "`frenzy token create`", status=exc.status) from None
    _logged_in(as_json, path, "the server accepts it", checked=True, accepted=True)


def _logged_in(as_json: bool, path, verdict: str, **answer) -> None:
    if as_json:
        emit({"credentials": str(path), **answer, "detail": verdict})
    else:
        console.print(f"saved the token in {path} (mode 600)")
        console.print(verdict)


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else "-"


def register(app: typer.Typer) -> None:
    app.add_typer(token_app, name="token")
    app.command()(login)

"""Users and API tokens: how a request proves who sent it, and what that user may see.

Tokens: `frz.<id>.<secret>`, the secret 32 random bytes (`secrets.token_urlsafe`). The store keeps
the id, the user and sha256(secret), never the token: a copy of the database lets nobody in. A
request's token is found by its id and its secret's hash compared in constant time
(`hmac.compare_digest`). sha256 and no slow KDF: the secret has 256 bits of entropy, so there is
nothing to brute-force; a slow hash would only slow every request.

Rules:
- `/healthz` is open; `/metrics` (every user's running jobs) needs an admin's token, unless the server
  runs with `--no-metrics-auth`.
- A server listening on loopback with no active token in its store needs no token (the zero-setup
  default): every request addressed to a loopback name (its Host header: a page that re-resolves
  its own name to 127.0.0.1 still names itself there) is the local default user, an admin. Once a
  token exists (or the server listens beyond loopback) every other endpoint needs
  `Authorization: Bearer <token>` (401 otherwise).
- Listening beyond loopback with no token at all is refused at start (`check_listen`).
- A user sees, follows and cancels only their own jobs; an admin sees all. Another user's job is a 404
  with the very message of a job that does not exist, so job ids cannot be probed.

Token commands (`frenzy token ...`) work on the store directly, on the server machine: the first
token cannot come from an API that needs one, and there is then no admin endpoint to attack.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
import time
import uuid
from dataclasses import dataclass
from typing import Optional, Protocol

from frenzy.control.records import LOCAL_USER, JobRecord, TokenRecord
from frenzy.control.store import UnknownJobError

TOKEN_PREFIX = "frz"
USER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
TOKEN_ID = re.compile(r"^t-[0-9a-f]{12}$")
SECRET = re.compile(r"^[A-Za-z0-9_-]{20,128}$")
HOW_TO_GET_A_TOKEN = ("an operator creates one on the server machine with `frenzy token create --user NAME`; "
                      "then run `frenzy login --token TOKEN` or set FRENZY_TOKEN")


class TokenStore(Protocol):
    def add_token(self, *, token_id: str, user: str, token_hash: str, admin: bool | None,
                  now: float) -> TokenRecord: ...
    def token_hash(self, token_id: str) -> tuple[TokenRecord, str] | None: ...
    def has_tokens(self) -> bool: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Principal:
    """Who a request is from."""
    user: str
    admin: bool

    def may_see(self, job: JobRecord) -> bool:
        return self.admin or job.owner == self.user

    def owner_filter(self) -> str | None:
        """The owner to list jobs of: None (all) for an admin."""
        return None if self.admin else self.user


LOCAL = Principal(user=LOCAL_USER, admin=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthSettings:
    open_without_tokens: bool = True  # loopback: no token needed while the store has none
    metrics_auth: bool = True  # /metrics needs a token too (whenever tokens are needed at all)

    @classmethod
    def for_host(cls, host: str, *, metrics_auth: bool = True) -> "AuthSettings":
        return cls(open_without_tokens=is_loopback(host), metrics_auth=metrics_auth)


class AuthError(Exception):
    """401: no usable token. The message says how to get one."""


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def check_user_name(user: str) -> str:
    if not USER_NAME.match(user or ""):
        raise ValueError(f"user name {user!r} is not valid: use 1-64 letters, digits, '.', '_', '@' or '-', "
                         "starting with a letter or digit")
    return user


def create_token(store: TokenStore, user: str, *, admin: bool | None = None,
                 now: float | None = None) -> tuple[TokenRecord, str]:
    """(the stored record, the token): the token is shown once and exists nowhere else."""
    check_user_name(user)
    token_id = "t-" + uuid.uuid4().hex[:12]
    secret = secrets.token_urlsafe(32)
    record = store.add_token(token_id=token_id, user=user, token_hash=hash_secret(secret), admin=admin,
                             now=time.time() if now is None else now)
    return record, f"{TOKEN_PREFIX}.{token_id}.{secret}"


def authenticate(store: TokenStore, token: str) -> Principal:
    """The user a token belongs to; AuthError if it is malformed, unknown or revoked."""
    prefix, _, rest = (token or "").strip().partition(".")
    token_id, _, secret = rest.partition(".")
    # Only a well-formed token reaches the database (no odd bytes or lengths in its queries).
    well_formed = prefix == TOKEN_PREFIX and TOKEN_ID.match(token_id) and SECRET.match(secret)
    found = store.token_hash(token_id) if well_formed else None
    # Compare against a dummy hash when the id is unknown, so both paths take the same time.
    stored = found[1] if found else "0" * 64
    if not hmac.compare_digest(hash_secret(secret), stored) or found is None:
        raise AuthError(f"the token is not valid (malformed, unknown or revoked); {HOW_TO_GET_A_TOKEN}")
    return Principal(user=found[0].user, admin=found[0].admin)


def principal(store: TokenStore, settings: AuthSettings, authorization: Optional[str],
              host: Optional[str] = None) -> Principal:
    """Who sent a request with this Authorization header (and, where it was sent without a token, to
    this Host header: None where none was sent), under these settings."""
    if authorization:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthError(f"send the token as `Authorization: Bearer <token>`; {HOW_TO_GET_A_TOKEN}")
        return authenticate(store, token)
    if settings.open_without_tokens and not store.has_tokens():
        # A web page whose own name an attacker re-resolves to 127.0.0.1 (DNS rebinding) reaches a
        # loopback server as same-origin, but its requests still name the attacker's host.
        if host is None or is_loopback(host_name(host)):
            return LOCAL
        raise AuthError(f"this server answers without a token only requests addressed to a loopback name "
                        f"(Host: localhost, 127.0.0.1 or [::1]), not Host {host[:80]!r}: reach it as "
                        f"http://127.0.0.1:PORT, or send a token; {HOW_TO_GET_A_TOKEN}")
    raise AuthError(f"authentication required: send `Authorization: Bearer <token>`; {HOW_TO_GET_A_TOKEN}")


HOST_HEADER = re.compile(r"^(\[[0-9a-f:.]+\]|[^:\[\]]+)(:[0-9]{1,5})?$")


def host_name(host: str) -> str:
    """The name or address of a Host header without its port (`[::1]:8000` -> `[::1]`); the header
    itself where it is no `name[:port]`."""
    found = HOST_HEADER.match(host.strip().lower())
    return found.group(1) if found else host


def visible_job(job: JobRecord, who: Principal) -> JobRecord:
    """The job, if `who` may see it; else exactly what a job that does not exist raises."""
    if not who.may_see(job):
        raise UnknownJobError(job.id)
    return job


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def check_listen(host: str, store: TokenStore) -> None:
    """Refuse to serve beyond loopback with no token: anyone who can reach it could run jobs."""
    if not is_loopback(host) and not store.has_tokens():
        raise SystemExit(
            f"refusing to listen on {host} without authentication: the store has no API token. Create one "
            "first on this machine, e.g. `frenzy token create --user admin --admin` (with the same --db-url), "
            "then start the server again; or listen on 127.0.0.1 (the default).")


def fastapi_dependencies(store: TokenStore, settings: AuthSettings):
    """(user, metrics): FastAPI dependencies returning the request's Principal, raising 401 with how to
    get a token. `metrics` wants an admin (403 otherwise), or lets everyone through when configured open."""
    from fastapi import Depends, Header, HTTPException
    from fastapi.security import HTTPBearer

    # The scheme documents the header in OpenAPI; the raw header is read to answer a wrong one precisely.
    bearer = HTTPBearer(auto_error=False, description="an API token: `frenzy token create` on the server machine")

    def user(authorization: Optional[str] = Header(None, include_in_schema=False),
             host: Optional[str] = Header(None, include_in_schema=False), _scheme=Depends(bearer)) -> Principal:
        try:
            return principal(store, settings, authorization, host)
        except AuthError as exc:
            raise HTTPException(status_code=401, detail=str(exc), headers={"WWW-Authenticate": "Bearer"}) from None

    def metrics(authorization: Optional[str] = Header(None, include_in_schema=False),
                host: Optional[str] = Header(None, include_in_schema=False), _scheme=Depends(bearer)) -> Principal:
        if not settings.metrics_auth:
            return LOCAL
        who = user(authorization, host)
        if not who.admin:  # the metrics name every user's running jobs
            raise HTTPException(status_code=403, detail="/metrics shows every user's jobs: it needs an admin's token "
                                "(`frenzy token create --user NAME --admin`), or a server started with "
                                "--no-metrics-auth")
        return who

    return user, metrics

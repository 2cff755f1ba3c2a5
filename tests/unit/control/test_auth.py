"""Users and API tokens over the real store and app: who may call what, whose jobs they see, how
tokens are kept, the private files, and the refusal to serve beyond loopback without a token."""

from __future__ import annotations

import hashlib
import os
import stat

import pytest
from typer.testing import CliRunner

from frenzy.control import auth
from frenzy.control.store import SqlJobStore
from tests.unit.control.conftest import build_client
from tests.unit.control.test_loop import TINY

BODY = {"model": TINY, "global_batch": 16, "seq_len": 256, "steps": 3}


def _app(tmp_path, settings: auth.AuthSettings | None):
    return build_client(tmp_path, auth=settings)


@pytest.fixture
def secured(tmp_path):
    """A server listening beyond loopback, with users alice and bob and an admin."""
    client = _app(tmp_path, auth.AuthSettings.for_host("0.0.0.0"))
    client.tokens = {user: auth.create_token(client.store, user, admin=user == "root")[1]
                     for user in ("alice", "bob", "root")}
    return client


def _as(client, user):
    return {"Authorization": f"Bearer {client.tokens[user]}"}


def test_every_endpoint_but_healthz_needs_a_valid_token(secured):
    assert secured.get("/healthz").status_code == 200
    alice = secured.tokens["alice"]
    record_id = alice.split(".")[1]
    secured.store.revoke_token(secured.tokens["bob"].split(".")[1], now=1.0)
    bad_headers = [None, {"Authorization": "Bearer frz.t-000000000000.nope"},
                   {"Authorization": f"Bearer {alice[:-1]}"}, {"Authorization": f"Basic {alice}"},
                   {"Authorization": f"Bearer frz.{record_id}"}, {"Authorization": "Bearer " + "x" * 8000},
                   {"Authorization": f"Bearer frz.{record_id}' OR 1=1 --.{alice.split('.')[2]}"},
                   _as(secured, "bob")]  # bob's is revoked
    for path in ("/v1/jobs", "/v1/jobs/j-x", "/v1/jobs/j-x/logs", "/v1/jobs/j-x/artifacts",
                 "/v1/cluster", "/v1/plans?model=gpt2", "/metrics", "/openapi.json", "/docs"):
        for headers in bad_headers:
            r = secured.get(path, headers=headers)
            assert r.status_code == 401, (path, headers, r.text)
            assert "frenzy token create" in r.json()["detail"] and r.headers["www-authenticate"] == "Bearer"
    assert secured.post("/v1/jobs", json=BODY).status_code == 401
    assert secured.delete("/v1/jobs/j-x").status_code == 401
    assert secured.get("/v1/cluster", headers=_as(secured, "alice")).status_code == 200
    assert secured.get("/metrics", headers=_as(secured, "alice")).status_code == 403  # names others' jobs
    assert secured.get("/metrics", headers=_as(secured, "root")).status_code == 200
    assert secured.get("/redoc").status_code == 404
    assert "swagger" in secured.get("/docs", headers=_as(secured, "alice")).text.lower()
    spec = secured.get("/openapi.json", headers=_as(secured, "alice")).json()
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"


def test_metrics_can_be_left_open(tmp_path):
    client = _app(tmp_path, auth.AuthSettings(open_without_tokens=False, metrics_auth=False))
    auth.create_token(client.store, "alice")
    assert client.get("/metrics").status_code == 200
    assert client.get("/v1/jobs").status_code == 401


def test_users_see_and_cancel_only_their_own_jobs_admins_all(secured):
    r = secured.post("/v1/jobs", json=BODY, headers=_as(secured, "alice"))
    assert r.status_code == 201, r.text
    job = r.json()["id"]
    bobs = secured.post("/v1/jobs", json=BODY, headers=_as(secured, "bob")).json()["id"]
    assert [j["id"] for j in secured.get("/v1/jobs", headers=_as(secured, "alice")).json()] == [job]
    assert [j["id"] for j in secured.get("/v1/jobs", headers=_as(secured, "bob")).json()] == [bobs]
    everyone = secured.get("/v1/jobs", headers=_as(secured, "root")).json()
    assert {(j["id"], j["owner"]) for j in everyone} == {(job, "alice"), (bobs, "bob")}

    # Another user's job answers exactly as a job that does not exist: ids cannot be probed.
    missing = secured.get("/v1/jobs/j-0000000000", headers=_as(secured, "bob"))
    for method, path in (("GET", f"/v1/jobs/{job}"), ("GET", f"/v1/jobs/{job}/logs"),
                         ("GET", f"/v1/jobs/{job}/artifacts"), ("GET", f"/v1/jobs/{job}/artifacts/x.json"),
                         ("DELETE", f"/v1/jobs/{job}")):
        r = secured.request(method, path, headers=_as(secured, "bob"))
        assert r.status_code == 404 and r.json()["detail"] == missing.json()["detail"].replace("j-0000000000", job)
    assert not secured.store.get_job(job).cancel_requested

    assert secured.get(f"/v1/jobs/{job}", headers=_as(secured, "alice")).json()["owner"] == "alice"
    assert secured.get(f"/v1/jobs/{bobs}/logs", headers=_as(secured, "root")).status_code == 200
    assert secured.delete(f"/v1/jobs/{bobs}", headers=_as(secured, "root")).status_code == 200
    assert secured.delete(f"/v1/jobs/{job}", headers=_as(secured, "alice")).status_code == 200
    assert secured.store.get_job(job).cancel_requested and secured.store.get_job(bobs).cancel_requested


def test_loopback_needs_no_token_until_one_exists(tmp_path):
    client = _app(tmp_path, None)  # create_app's default: a loopback server's rules
    r = client.post("/v1/jobs", json=BODY)
    assert r.status_code == 201, r.text
    assert client.get("/v1/jobs").json()[0]["owner"] == "local"
    _, token = auth.create_token(client.store, "alice")
    assert client.get("/v1/jobs").status_code == 401  # once a token exists, everyone needs one
    mine = client.get("/v1/jobs", headers={"Authorization": f"Bearer {token}"})
    assert mine.status_code == 200 and mine.json() == []  # the local user's jobs are not alice's
    client.store.revoke_token(token.split(".")[1], now=2.0)
    assert client.get("/v1/jobs").status_code == 200  # no active token: zero-setup again


def test_without_tokens_only_requests_addressed_to_a_loopback_name_are_answered(tmp_path):
    # Before: any Host was answered as the local admin, so a web page that re-resolves its own name
    # to 127.0.0.1 (DNS rebinding) could submit, list and cancel jobs.
    client = _app(tmp_path, None)
    for host in ("127.0.0.1:8000", "localhost:8000", "LOCALHOST", "[::1]:8000", "127.0.0.1"):
        assert client.get("/v1/jobs", headers={"Host": host}).status_code == 200, host
    for host in ("attacker.example:8000", "attacker.example", "127.0.0.1.attacker.example", "[::1].evil:80",
                 "10.0.0.5:8000", ""):
        r = client.post("/v1/jobs", json=BODY, headers={"Host": host})
        assert r.status_code == 401 and "loopback name" in r.json()["detail"], (host, r.text)
        assert client.get("/v1/jobs", headers={"Host": host}).status_code == 401
    assert client.get("/v1/jobs").json() == []  # nothing was queued
    _, token = auth.create_token(client.store, "alice")  # a token is answered whatever the Host
    assert client.get("/v1/jobs", headers={"Host": "attacker.example", "Authorization": f"Bearer {token}"}
                      ).status_code == 200


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("localhost", True), ("::1", True),
                                            ("127.0.0.2", True), ("0.0.0.0", False), ("::", False),
                                            ("10.0.0.5", False), ("myhost", False)])
def test_loopback_addresses(host, loopback):
    assert auth.is_loopback(host) is loopback


def test_serving_beyond_loopback_without_a_token_is_refused(tmp_path):
    from frenzy.cli.main import app
    from frenzy.control.server import ServerSettings, build

    url = f"sqlite:///{tmp_path / 'f.db'}"
    with pytest.raises(SystemExit, match="frenzy token create --user admin --admin"):
        build(ServerSettings(host="0.0.0.0", db_url=url))
    out = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0", "--db-url", url])
    assert out.exit_code != 0 and "refusing to listen on 0.0.0.0" in out.output
    store = SqlJobStore(url)
    auth.check_listen("127.0.0.1", store)  # loopback: fine without a token
    auth.create_token(store, "admin", admin=True)
    auth.check_listen("0.0.0.0", store)  # with one: allowed


def test_the_store_never_holds_a_token(tmp_path):
    store = SqlJobStore(f"sqlite:///{tmp_path / 'f.db'}")
    record, token = auth.create_token(store, "alice", admin=False)
    prefix, token_id, secret = token.split(".")
    assert prefix == "frz" and token_id == record.id and len(secret) >= 43  # 32 random bytes, base64
    found, stored = store.token_hash(record.id)
    assert stored == hashlib.sha256(secret.encode()).hexdigest() and found.user == "alice"
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("f.db"))
    assert secret.encode() not in raw and token.encode() not in raw
    assert auth.authenticate(store, token) == auth.Principal(user="alice", admin=False)
    with pytest.raises(ValueError, match="user name"):
        auth.create_token(store, "bad name")
    # An existing user keeps their role unless asked; --admin promotes.
    auth.create_token(store, "alice", admin=True)
    assert auth.authenticate(store, token).admin


def test_state_files_are_private(tmp_path, monkeypatch):
    from frenzy.cli.client import ApiError, Client, read_credentials, write_credentials

    folder = tmp_path / "state"
    store = SqlJobStore(f"sqlite:///{folder / 'frenzy.db'}")
    store.create_job(name="a", request={}, priority=0, now=1.0)
    mode = lambda p: stat.S_IMODE(os.stat(p).st_mode)  # noqa: E731
    assert mode(folder) == 0o700
    for name in ("frenzy.db", "frenzy.db-wal", "frenzy.db-shm"):
        assert mode(folder / name) == 0o600, name

    creds = tmp_path / "home" / "credentials"
    write_credentials("frz.t-1.s", creds)
    assert mode(creds) == 0o600 and mode(creds.parent) == 0o700 and read_credentials(creds) == "frz.t-1.s"
    monkeypatch.setenv("FRENZY_CREDENTIALS", str(creds))
    monkeypatch.delenv("FRENZY_TOKEN", raising=False)
    assert Client("http://127.0.0.1:9").http.headers["authorization"] == "Bearer frz.t-1.s"
    monkeypatch.setenv("FRENZY_TOKEN", "frz.t-2.s")
    assert Client("http://127.0.0.1:9").http.headers["authorization"] == "Bearer frz.t-2.s"
    monkeypatch.delenv("FRENZY_TOKEN")
    creds.chmod(0o644)
    with pytest.raises(ApiError, match="chmod 600"):
        read_credentials(creds)
    with pytest.raises(ApiError, match="chmod 600"):
        Client("http://127.0.0.1:9").jobs()  # refused, not sent


def test_login_and_token_commands(tmp_path, monkeypatch):
    from frenzy.cli.main import app

    monkeypatch.setenv("FRENZY_CREDENTIALS", str(tmp_path / "creds" / "credentials"))
    url = f"sqlite:///{tmp_path / 'f.db'}"
    runner = CliRunner()
    out = runner.invoke(app, ["token", "create", "--user", "carol", "--admin", "--db-url", url])
    assert out.exit_code == 0, out.output
    token = out.stdout.strip().splitlines()[0]
    listed = runner.invoke(app, ["token", "list", "--db-url", url]).output
    assert "carol" in listed and "admin" in listed and token.split(".")[2] not in listed
    out = runner.invoke(app, ["login", "--token", token, "--url", "http://127.0.0.1:9"])
    assert out.exit_code == 0 and "not checked" in out.output
    assert (tmp_path / "creds" / "credentials").stat().st_mode & 0o777 == 0o600
    assert runner.invoke(app, ["token", "revoke", token.split(".")[1], "--db-url", url]).exit_code == 0
    assert runner.invoke(app, ["token", "revoke", token.split(".")[1], "--db-url", url]).exit_code == 2
    assert not SqlJobStore(url).has_tokens()

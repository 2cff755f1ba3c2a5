"""`frenzy team ...` and `frenzy cluster` against the real app in process (its TestClient is the
CLI client's HTTP session)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from frenzy.cli import teams as cli_teams
from frenzy.cli.client import Client
from frenzy.cli.main import app
from frenzy.control import auth
from tests.unit.control.conftest import build_client

runner = CliRunner()


@pytest.fixture
def server(tmp_path, monkeypatch):
    test_client = build_client(tmp_path, auth=auth.AuthSettings.for_host("0.0.0.0"))
    tokens = {u: auth.create_token(test_client.store, u, admin=u == "root")[1] for u in ("alice", "root")}
    who = {"token": tokens["root"]}

    def client(_url=None):
        c = Client("http://testserver", token=who["token"])
        test_client.headers["Authorization"] = f"Bearer {who['token']}"
        c.http = test_client
        return c

    monkeypatch.setattr(cli_teams, "_client", client)
    monkeypatch.setattr("frenzy.cli.serve._client", client)
    test_client.who, test_client.tokens = who, tokens
    return test_client


def run(*args):
    return runner.invoke(app, list(args))


def test_team_set_add_user_and_list(server):
    r = run("team", "set", "vision", "--quota", "H100=8", "--quota", "A10G=4", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == {"name": "vision", "quota": {"H100-SXM-80G": 8, "A10G-24G": 4}, "members": []}
    assert run("team", "add-user", "vision", "alice").exit_code == 0
    r = run("team", "list", "--json")
    assert json.loads(r.output)["teams"] == [{"name": "vision", "quota": {"H100-SXM-80G": 8, "A10G-24G": 4},
                                             "members": ["alice"]}]
    r = run("team", "list")
    assert r.exit_code == 0 and "vision" in r.output and "alice" in r.output and "H100-SXM-80G" in r.output
    r = run("cluster")
    assert r.exit_code == 0 and "vision" in r.output and "borrowed" in r.output


@pytest.mark.parametrize("args, words", [
    (["team", "set", "vision", "--quota", "H100"], ["TYPE=GPUS"]),
    (["team", "set", "vision", "--quota", "H100=-1"], ["TYPE=GPUS"]),
    (["team", "set", "vision", "--quota", "H10O=8"], ["unknown GPU type", "Did you mean"]),
    (["team", "set", "vision", "--quota", "H100=99999999"], ["65536"]),
    (["team", "add-user", "nobody", "alice"], ["no team 'nobody'"]),
])
def test_bad_input_is_a_clean_error(server, args, words):
    r = run(*args)
    assert r.exit_code == 2 and "Traceback" not in r.output
    for word in words:
        assert word in r.output, r.output


def test_non_admins_are_told_who_may(server):
    server.who["token"] = server.tokens["alice"]
    r = run("team", "set", "vision", "--quota", "H100=8")
    assert r.exit_code == 2 and "admin" in r.output

"""What the client commands do with ids, names, tokens, credentials files and server URLs that are
not what Frenzy gives: never a request to another route, never an unsaved-but-unsendable token,
never a traceback; with --json always one {"error", "hint"} object and exit code 2."""

from __future__ import annotations

import json
import os
import threading
from functools import partial
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.unit.cli.test_scripting import NO_SERVER, json_error, run
from tests.unit.cli.test_teams_cli import server  # noqa: F401 - the fixture: the real app behind the CLI's client


def test_ids_and_names_never_address_another_route(server):  # noqa: F811
    assert run("team", "set", "vision", "--quota", "H100=8").exit_code == 0
    job = server.post("/v1/jobs", json={"model": "gpt2", "steps": 2}).json()["id"]
    # each would have reached another route through `..`, a `/` or a `?` in the id or the name
    for args in (["cancel", "../teams/vision"], ["status", "../teams"], ["team", "delete", f"../jobs/{job}"],
                 ["team", "add-user", "vision", "../../jobs"], ["team", "add-user", "vision", "a?b"],
                 ["team", "remove-user", "vision", "..%2f.."], ["logs", ".."], ["status", f"{job}?x=1"],
                 ["artifacts", f"{job}/../.."]):
        out = json_error(*args)
        assert out["status"] in (0, 404, 422), (args, out)
    assert [t["name"] for t in server.get("/v1/teams").json()] == ["vision"]
    assert server.get("/v1/teams").json()[0]["members"] == []
    assert server.get(f"/v1/jobs/{job}").json()["state"] != "cancelled"
    assert not server.store.get_job(job).cancel_requested


@pytest.mark.parametrize("content, says", [
    (b"not json", "not one `frenzy login` wrote"),
    (b"[1]", "not one `frenzy login` wrote"),
    (b'{"token": 5}', "not one `frenzy login` wrote"),
    (b'{"token": "bad token"}', "characters no token has"),
    (b'{"token": "\xc3\xa9"}', "characters no token has"),
])
def test_a_credentials_file_login_did_not_write_is_one_clean_error(tmp_path, monkeypatch, content, says):
    creds = tmp_path / "credentials"
    creds.write_bytes(content)
    creds.chmod(0o600)
    monkeypatch.setenv("FRENZY_CREDENTIALS", str(creds))
    monkeypatch.delenv("FRENZY_TOKEN", raising=False)
    out = json_error("jobs", "--url", NO_SERVER)
    assert says in out["error"] and "frenzy login" in out["error"] and out["status"] == 0


@pytest.mark.parametrize("make", [os.mkdir, os.mkfifo])
def test_a_credentials_path_that_is_no_file_is_refused_without_blocking(tmp_path, monkeypatch, make):
    creds = tmp_path / "credentials"
    make(creds, 0o700)  # a FIFO would block an open for reading for ever
    monkeypatch.setenv("FRENZY_CREDENTIALS", str(creds))
    monkeypatch.delenv("FRENZY_TOKEN", raising=False)
    answers = []
    call = threading.Thread(target=lambda: answers.append(json_error("jobs", "--url", NO_SERVER)), daemon=True)
    call.start()
    call.join(timeout=30)
    assert not call.is_alive(), "reading the credentials blocked"
    assert "not a regular file" in answers[0]["error"]


@pytest.mark.parametrize("token", ["é", "frz.a b", "frz.t-1.s\nX-Admin: 1", "x" * 600])
def test_a_token_no_header_can_carry_is_refused_and_never_saved(tmp_path, monkeypatch, token):
    creds = tmp_path / "credentials"
    monkeypatch.setenv("FRENZY_CREDENTIALS", str(creds))
    assert "characters no token has" in json_error("login", "--token", token, "--url", NO_SERVER)["error"]
    assert not creds.exists()
    monkeypatch.setenv("FRENZY_TOKEN", token)
    assert "FRENZY_TOKEN" in json_error("jobs", "--url", NO_SERVER)["error"]


@pytest.mark.parametrize("url", ["not a url", "ftp://127.0.0.1:9", "http://[::1", "http://127.0.0.1:99999"])
def test_an_unusable_server_url_is_one_clean_error(monkeypatch, url):
    monkeypatch.delenv("FRENZY_TOKEN", raising=False)
    monkeypatch.setenv("FRENZY_CREDENTIALS", "/nonexistent/credentials")
    out = json_error("jobs", "--url", url)
    assert "FRENZY_URL" in out["error"] and out["status"] == 0, out


def test_a_server_that_is_not_frenzy_is_named_as_such(tmp_path, monkeypatch):
    """A real HTTP server (Python's file server) answering 200 with a page, not the API's JSON."""
    (tmp_path / "v1").mkdir()
    (tmp_path / "v1" / "jobs").write_text("<html>a file server</html>")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(SimpleHTTPRequestHandler, directory=str(tmp_path)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    monkeypatch.delenv("FRENZY_TOKEN", raising=False)
    monkeypatch.setenv("FRENZY_CREDENTIALS", "/nonexistent/credentials")
    try:
        out = json_error("jobs", "--url", f"http://127.0.0.1:{httpd.server_address[1]}")
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)
    assert "other than JSON" in out["error"] and "Frenzy server" in out["error"], json.dumps(out)


class _Garbage(BaseHTTPRequestHandler):
    """Answers every request with the status and JSON body set on the server."""

    def _answer(self):
        status, body = self.server.answer
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = _answer

    def log_message(self, *args):
        pass


COMMANDS = [["jobs"], ["status", "j-1"], ["cluster"], ["logs", "j-1"], ["cancel", "j-1"], ["artifacts", "j-1"],
            ["team", "list"], ["team", "set", "vision", "--quota", "A10G-24G=1"]]


@pytest.mark.parametrize("status, body", [(200, b"[1, 2]"), (200, b'"x"'), (200, b"null"), (200, b"{}"),
                                          (200, b'[{"id": 1}]'), (200, b'{"id": null, "state": 5}'),
                                          (500, b"[1]"), (500, b'"boom"'), (404, b"null")])
def test_json_of_another_shape_is_one_error_naming_the_server(monkeypatch, status, body):
    # Before: "internal error: TypeError/KeyError/AttributeError ... report it" from inside the commands.
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Garbage)
    httpd.answer = (status, body)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    monkeypatch.delenv("FRENZY_TOKEN", raising=False)
    monkeypatch.setenv("FRENZY_CREDENTIALS", "/nonexistent/credentials")
    try:
        for command in COMMANDS:
            out = json_error(*command, "--url", f"http://127.0.0.1:{httpd.server_address[1]}")
            assert "internal error" not in out["error"], (command, out)
            if status == 200:
                assert "is not a Frenzy" in out["error"] and "FRENZY_URL" in out["hint"], (command, out)
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)

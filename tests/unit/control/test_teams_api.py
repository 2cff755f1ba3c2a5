"""The teams API over the real app and store: admins only, quotas checked (catalog names with
suggestions, whole non-negative bounded counts), membership one team per user, and the per-team
quota / used / borrowed in /v1/cluster and /metrics."""

from __future__ import annotations

import pytest

from frenzy.control import auth
from frenzy.sched.quotas import MAX_QUOTA_GPUS
from tests.unit.control.conftest import build_client
from tests.unit.control.test_loop import TINY


@pytest.fixture
def secured(tmp_path):
    client = build_client(tmp_path, auth=auth.AuthSettings.for_host("0.0.0.0"))
    client.tokens = {u: auth.create_token(client.store, u, admin=u == "root")[1] for u in ("alice", "root")}
    return client


def _as(client, user):
    return {"Authorization": f"Bearer {client.tokens[user]}"}


def test_only_admins_manage_teams(secured):
    calls = [("get", "/v1/teams", None), ("put", "/v1/teams/vision", {"quota": {"H100": 8}}),
             ("delete", "/v1/teams/vision", None), ("put", "/v1/teams/vision/members/alice", None),
             ("delete", "/v1/teams/vision/members/alice", None)]
    for method, path, body in calls:
        kwargs = {"json": body} if body is not None else {}
        assert secured.request(method, path, **kwargs).status_code == 401
        r = secured.request(method, path, headers=_as(secured, "alice"), **kwargs)
        assert r.status_code == 403, (method, path, r.text)
        assert "admin" in r.json()["detail"]
    assert secured.store.list_teams() == []  # nothing a non-admin sent was applied


def test_admins_set_list_and_change_membership(secured):
    root = _as(secured, "root")
    r = secured.put("/v1/teams/vision", json={"quota": {"H100": 8, "a10g": 4}}, headers=root)
    assert r.status_code == 200, r.text
    assert r.json() == {"name": "vision", "quota": {"H100-SXM-80G": 8, "A10G-24G": 4}, "members": []}
    assert secured.put("/v1/teams/nlp", json={"quota": {"A10G": 2}}, headers=root).status_code == 200
    assert secured.put("/v1/teams/vision/members/alice", headers=root).json()["members"] == ["alice"]
    assert secured.put("/v1/teams/vision/members/alice", headers=root).status_code == 200  # idempotent
    r = secured.put("/v1/teams/nlp/members/alice", headers=root)
    assert r.status_code == 409 and "remove-user vision alice" in r.json()["detail"]
    # replacing the quota keeps the members
    r = secured.put("/v1/teams/vision", json={"quota": {"H100": 4}}, headers=root)
    assert r.json() == {"name": "vision", "quota": {"H100-SXM-80G": 4}, "members": ["alice"]}
    listed = secured.get("/v1/teams", headers=root).json()
    assert [(t["name"], t["members"]) for t in listed] == [("nlp", []), ("vision", ["alice"])]
    assert secured.delete("/v1/teams/vision/members/alice", headers=root).json()["members"] == []
    assert secured.delete("/v1/teams/vision/members/alice", headers=root).status_code == 404
    assert secured.delete("/v1/teams/vision", headers=root).status_code == 200
    r = secured.delete("/v1/teams/visoin", headers=root)
    assert r.status_code == 404 and "Did you mean: nlp" not in r.json()["detail"]
    r = secured.put("/v1/teams/nlq/members/alice", headers=root)
    assert r.status_code == 404 and "Did you mean: nlp" in r.json()["detail"]


@pytest.mark.parametrize("quota, words", [
    ({"H10O": 8}, ["unknown GPU type 'H10O'", "Did you mean", "H100"]),
    ({"H100": -1}, ["greater than or equal to 0"]),
    ({"H100": MAX_QUOTA_GPUS + 1}, ["less than or equal to 65536"]),
    ({"H100": 10**30}, ["less than or equal to 65536"]),
    ({"H100": 2.5}, ["valid integer"]),
    ({"H100": "8"}, ["valid integer"]),
    ({"H100": True}, ["valid integer"]),
    ({"H100": None}, ["valid integer"]),
    ({"H100": 8, "h100-sxm": 4}, ["twice"]),
    ({"x" * 65: 1}, ["at most 64 characters"]),
    ({"\x00": 1}, ["pattern"]),
    ({f"t{i}": 1 for i in range(65)}, ["at most 64 items"]),
])
def test_bad_quotas_are_a_422_saying_what_to_change(secured, quota, words):
    r = secured.put("/v1/teams/vision", json={"quota": quota}, headers=_as(secured, "root"))
    assert r.status_code == 422, r.text
    for word in words:
        assert word in r.json()["detail"], (word, r.json()["detail"])
    assert secured.store.list_teams() == []


@pytest.mark.parametrize("path, body", [
    ("/v1/teams/" + "t" * 65, {"quota": {}}), ("/v1/teams/-dash", {"quota": {}}), ("/v1/teams/a%00b", {"quota": {}}),
    ("/v1/teams/ok", {}), ("/v1/teams/ok", {"quota": {}, "extra": 1}), ("/v1/teams/ok", {"quota": [1]}),
    ("/v1/teams/ok/members/" + "u" * 65, None),
])
def test_bad_names_and_bodies_are_4xx(secured, path, body):
    kwargs = {"json": body} if body is not None else {}
    r = secured.put(path, headers=_as(secured, "root"), **kwargs)
    assert 400 <= r.status_code < 500 and r.status_code != 403, r.text


def test_cluster_and_metrics_show_quota_used_and_borrowed(tmp_path):
    client = build_client(tmp_path)  # loopback, no token: the local admin
    assert client.get("/v1/cluster").json()["teams"] == {}
    assert client.put("/v1/teams/ml", json={"quota": {"A100-SXM-80G": 1}}).status_code == 200
    client.put("/v1/teams/ml/members/local")
    body = {"model": TINY, "global_batch": 16, "seq_len": 256, "steps": 3, "limits": {"gpu_types": ["A100-SXM-80G"]}}
    for _ in range(2):
        assert client.post("/v1/jobs", json=body).status_code == 201
    client.loop.step()
    used = sum(sum(g for _, g in launch.allocation) for launch in client.executor.launched)
    assert used == 2  # one GPU within the quota, the other borrowed (nobody else wants it)
    teams = client.get("/v1/cluster").json()["teams"]
    assert teams == {"ml": {"A100-SXM-80G": {"quota": 1, "used": 2, "borrowed": 1}}}
    text = client.get("/metrics").text
    assert 'frenzy_team_quota_gpus{gpu_type="A100-SXM-80G",team="ml"} 1.0' in text
    assert 'frenzy_team_used_gpus{gpu_type="A100-SXM-80G",team="ml"} 2.0' in text
    assert 'frenzy_team_borrowed_gpus{gpu_type="A100-SXM-80G",team="ml"} 1.0' in text

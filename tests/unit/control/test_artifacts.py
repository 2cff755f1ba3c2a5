"""A job's artifacts over the HTTP API: listed, downloaded byte for byte, and nothing outside the
job's artifact folder is ever served (hostile paths are 404s that say how to list what exists)."""

from __future__ import annotations

import os

import pytest

from frenzy.control.artifacts import UnknownArtifactError, artifact_root, list_files, resolve
from tests.unit.control.test_loop import TINY


@pytest.fixture
def job(client, tmp_path):
    r = client.post("/v1/jobs", json={"model": TINY, "global_batch": 16, "seq_len": 256, "steps": 3})
    assert r.status_code == 201, r.text
    job_id = r.json()["id"]
    root = artifact_root(tmp_path, job_id)
    (root / "sub").mkdir(parents=True)
    (root / "adapter_model.safetensors").write_bytes(os.urandom(300_000))
    (root / "sub" / "notes.txt").write_text("inside")
    (tmp_path / "secret.txt").write_text("outside the artifacts")
    (root / "escape.txt").symlink_to(tmp_path / "secret.txt")
    (root / "half.tmp").write_text("being written")
    return job_id, root


def test_listing_shows_regular_files_only_and_is_not_ready_without_the_manifest(client, job):
    job_id, root = job
    out = client.get(f"/v1/jobs/{job_id}/artifacts").json()
    assert [f["path"] for f in out["files"]] == ["adapter_model.safetensors", "sub/notes.txt"]
    assert out["total_bytes"] == 300_000 + len("inside") and out["ready"] is False
    (root / "frenzy_job.json").write_text("{}")
    assert client.get(f"/v1/jobs/{job_id}/artifacts").json()["ready"] is True


def test_download_is_the_file_byte_for_byte(client, job):
    job_id, root = job
    r = client.get(f"/v1/jobs/{job_id}/artifacts/adapter_model.safetensors")
    assert r.status_code == 200 and r.content == (root / "adapter_model.safetensors").read_bytes()
    assert client.get(f"/v1/jobs/{job_id}/artifacts/sub/notes.txt").text == "inside"


def test_byte_ranges_are_served_and_a_bad_one_is_answered_in_the_api_error_shape(client, job):
    job_id, root = job
    data = (root / "adapter_model.safetensors").read_bytes()
    url = f"/v1/jobs/{job_id}/artifacts/adapter_model.safetensors"
    for header, part in (("bytes=0-99", data[:100]), ("bytes=299990-", data[-10:]), ("bytes=-5", data[-5:])):
        r = client.get(url, headers={"Range": header})
        assert r.status_code == 206 and r.content == part, header
    # before: 400 in plain text, and a 416 with an empty body
    for header, status, words in (("bytes=99-0", 400, "ends before it starts"), ("bytes=abc", 400, "not a byte range"),
                                  ("items=0-5", 400, "not a byte range"), ("bytes=\u00b2-5", 400, "not a byte range"),
                                  ("bytes=0-" + "9" * 5000, 400, "not a byte range"), ("bytes=", 400, "not a byte range"),
                                  ("bytes=300000-", 416, "past the end"),
                                  ("bytes=-0", 416, "past the end")):
        r = client.get(url, headers={"Range": header.encode("latin-1")})  # as raw HTTP carries it
        assert r.status_code == status and words in r.json()["detail"] and "300,000 bytes" in r.json()["detail"], r.text
    assert client.get(url, headers={"Range": "bytes=400000-"}).headers["content-range"] == "bytes */300000"


@pytest.mark.parametrize("path", ["../secret.txt", "sub/../../secret.txt", "escape.txt", "%2e%2e/secret.txt",
                                  "sub", "missing.bin", "..%2Fsecret.txt", "%2Fetc%2Fpasswd"])
def test_nothing_outside_the_artifacts_is_served(client, job, path):
    job_id, _ = job
    r = client.get(f"/v1/jobs/{job_id}/artifacts/{path}")
    assert r.status_code == 404, (path, r.status_code, r.text[:200])
    assert "outside" not in r.text


def test_resolve_refuses_every_way_out(tmp_path):
    root = tmp_path / "artifacts"
    root.mkdir()
    (root / "ok.json").write_text("{}")
    assert resolve(root, "ok.json") == (root / "ok.json").resolve()
    for bad in ["", "/etc/passwd", "../x", "a\\..\\..\\x", "ok.json\x00", str(tmp_path / "artifacts" / "ok.json")]:
        with pytest.raises(UnknownArtifactError):
            resolve(root, bad)
    assert list_files(tmp_path / "none") == []


def test_unknown_job_is_404(client):
    assert client.get("/v1/jobs/nope/artifacts").status_code == 404
    assert client.get("/v1/jobs/nope/artifacts/x").status_code == 404

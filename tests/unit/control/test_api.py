"""The HTTP API over the real store and loop, with an in-process executor (no Ray here; e2e has it)."""

from __future__ import annotations

import pytest

from tests.unit.control.test_loop import TINY


def test_submit_then_status_logs_cancel(client):
    r = client.post("/v1/jobs", json={"model": TINY, "global_batch": 16, "seq_len": 256, "steps": 3})
    assert r.status_code == 201, r.text
    job_id = r.json()["id"]
    assert r.json()["plans"] and r.json()["state"] == "queued"
    client.loop.step()
    detail = client.get(f"/v1/jobs/{job_id}").json()
    assert detail["state"] == "placed" and detail["placement"] and detail["chosen_plan"]["memory"]["breakdown"]
    assert detail["timings"]["submit_to_placed_s"] == 0.0
    assert [j["id"] for j in client.get("/v1/jobs").json()] == [job_id]
    assert any("placed" in ln["line"] for ln in client.get(f"/v1/jobs/{job_id}/logs").json()["lines"])
    cluster = client.get("/v1/cluster").json()
    assert sum(n["used_gpus"] for n in cluster["nodes"]) == detail["num_gpus"]
    metrics = client.get("/metrics").text
    assert "frenzy_running_jobs 1.0" in metrics and "frenzy_scheduling_latency_seconds_count 1.0" in metrics
    assert client.delete(f"/v1/jobs/{job_id}").status_code == 200
    client.loop.step()
    assert client.get(f"/v1/jobs/{job_id}").json()["state"] == "cancelled"
    assert client.get("/healthz").json()["ok"]


@pytest.mark.parametrize("body, status, words", [
    ({"model": "lama-3.1-8b"}, 422, ["Did you mean", "meta-llama/Llama-3.1-8B"]),
    ({"model": "gpt2", "global_batch": 10, "micro_batch": 4}, 422, ["not divisible", "multiple of 4"]),
    ({"model": "gpt2", "seq_len": 4096}, 422, ["exceeds the 1024 positions", "seq"]),
    ({"model": "gpt2", "num_gpus": 4}, 422, ["unknown field 'num_gpus'", "chosen by Frenzy"]),
    ({"model": "meta-llama/Llama-3.1-70B", "global_batch": 8, "seq_len": 2048}, 409,
     ["no plan", "GiB", "lora"]),
    ({"model": "gpt2", "dataset": "/nope.jsonl"}, 422, ["not an existing local"]),
])
def test_bad_specs_are_refused_with_what_to_change(client, body, status, words):
    r = client.post("/v1/jobs", json=body)
    assert r.status_code == status, r.text
    for word in words:
        assert word in r.json()["detail"], r.json()["detail"]
    assert client.get("/v1/jobs").json() == []


def test_dry_run_plans_queue_nothing(client):
    r = client.get("/v1/plans", params={"model": TINY, "global_batch": 16, "seq_len": 256})
    assert r.status_code == 200 and r.json()["plans"]
    assert {p["gpu_type"] for p in r.json()["plans"]} <= {"A100-SXM-80G", "A10G-24G"}
    assert r.json()["model_source"] == "formula"
    assert client.get("/v1/jobs").json() == []
    assert client.get("/v1/jobs/j-missing").status_code == 404
    assert "/v1/jobs" in client.get("/openapi.json").json()["paths"]

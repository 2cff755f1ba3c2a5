"""End to end on real Ray (two fake GPU types) through the HTTP API: jobs run to success on the
GPU types and nodes they were placed on, an OOM re-plans and resumes, cancel stops a run and gives
its GPUs back to Ray at once, a killed server loses nothing, GPUs Ray holds outside Frenzy are
not offered, and bad specs are refused with what to change."""

from __future__ import annotations

import time

import pytest

from frenzy.cli.client import ApiError
from tests.e2e.conftest import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
TINY = str(ROOT / "examples" / "tiny-llama" / "config.json")
NODE_TYPE = {"a100-sxm-80g-0": "A100-SXM-80G", "a10g-24g-0": "A10G-24G"}


def wait_for(client, job_id, states, timeout=400):
    deadline = time.time() + timeout
    while time.time() < deadline:
        job = client.job(job_id)
        if job["state"] in states:
            return job
        time.sleep(1)
    raise AssertionError(f"{job_id} still {job['state']} after {timeout}s: {client.logs(job_id)['lines'][-5:]}")


def assert_placement_respected(job):
    for attempt in job["attempts_detail"]:
        tp = int(attempt["plan"].split("tp")[1].split()[0].rstrip("+sp")) if " tp" in attempt["plan"] else 1
        for node, gpus in attempt["allocation"]:
            assert NODE_TYPE[node] == attempt["gpu_type"]  # a plan runs on its GPU type only
            assert gpus % tp == 0  # tensor-parallel groups never span nodes


def test_bad_specs_get_4xx_and_nothing_is_queued(client):
    cases = [({"model": "lama-3.2-1b"}, 422, "Did you mean"),
             ({"model": TINY, "global_batch": 6, "micro_batch": 4}, 422, "not divisible"),
             ({"model": "gpt2", "seq_len": 4096}, 422, "exceeds the 1024 positions"),  # learned positions
             ({"model": TINY, "gpus": 2}, 422, "chosen by Frenzy"),
             ({"model": "meta-llama/Llama-3.1-8B", "global_batch": 8, "seq_len": 1024}, 409, "add nodes")]
    before = len(client.jobs())
    for body, status, words in cases:
        with pytest.raises(ApiError) as err:
            client.submit(body)
        assert err.value.status == status and words in err.value.detail, err.value.detail
    assert len(client.jobs()) == before


def a100_held(ray) -> tuple[float, int]:
    """(A100s Ray counts as taken, placement groups not yet removed that ask for A100s)."""
    key = "gpu_type:A100-SXM-80G"
    taken = ray.cluster_resources().get(key, 0) - ray.available_resources().get(key, 0)
    groups = [g for g in ray.util.placement_group_table().values()
              if g["state"] != "REMOVED" and any(key in b for b in g["bundles"].values())]
    return taken, len(groups)


def wait_until_free(ray, timeout):
    deadline = time.time() + timeout
    while a100_held(ray) != (0, 0) and time.time() < deadline:
        time.sleep(0.1)
    return a100_held(ray)


def runner_alive(ray, name, namespace) -> bool:
    try:
        ray.get_actor(name, namespace=namespace)
    except ValueError:
        return False
    return True


def test_cancel_gives_the_gpus_back_to_ray(client, ray_view):
    from frenzy.executor.resources import NAMESPACE
    from frenzy.executor.runner import actor_name

    spec = {"model": TINY, "global_batch": 8, "seq_len": 64, "steps": 500, "limits": {"gpu_types": ["A100-SXM-80G"]}}
    # Cancelled while its workers start: the placement group exists, rank 0 has not named it yet.
    # The runner is killed at once, its Train controller with it, and the executor's next sweep
    # removes the group that controller left (placement.orphans).
    starting = client.submit(spec)
    deadline = time.time() + 120
    while a100_held(ray_view)[1] == 0 and time.time() < deadline:
        time.sleep(0.05)
    t = time.time()
    client.cancel(starting["id"])
    wait_for(client, starting["id"], {"cancelled"}, timeout=60)
    assert wait_until_free(ray_view, 90) == (0, 0)
    print(f"cancelled during start-up: A100s free in Ray {time.time() - t:.1f} s after the cancel")
    deadline = time.time() + 60
    while runner_alive(ray_view, actor_name(starting["id"], 1), NAMESPACE) and time.time() < deadline:
        time.sleep(0.5)
    assert not runner_alive(ray_view, actor_name(starting["id"], 1), NAMESPACE)

    # Cancelled while training: free in Ray by the time the job reads cancelled (Ray's resource view
    # trails by a fraction of a second). Ray Train's own cleaner never frees it without a dashboard.
    running = client.submit(spec)
    wait_for(client, running["id"], {"running"})
    assert a100_held(ray_view) == (2, 1)
    client.cancel(running["id"])
    wait_for(client, running["id"], {"cancelled"}, timeout=60)
    assert wait_until_free(ray_view, 3) == (0, 0)


def test_oom_replans_resumes_and_exports_a_loadable_model(client, tmp_path):
    from frenzy.train.reload import reload_and_evaluate
    from tests.e2e.test_finetune import download

    # The job needs 2.2x the live tensor bytes its worker measures (as an unmodelled buffer would): with the
    # CUDA runtime that is over a 3 GiB A10G at micro-batch 16, so it OOMs at step 2 and is re-planned.
    # (One GPU at most: the time-ranked planner would otherwise spread it over both A10Gs.)
    oom = client.submit({"model": TINY, "global_batch": 16, "seq_len": 128, "steps": 4, "micro_batch": 16,
                         "dataset": str(ROOT / "examples" / "data" / "tiny.jsonl"), "validation": 0.1,
                         "limits": {"gpu_types": ["A10G-24G"], "max_gpus": 1}, "emulation": {"peak_factor": 2.2}})
    victim = client.submit({"model": TINY, "global_batch": 8, "seq_len": 64, "steps": 500,
                            "limits": {"gpu_types": ["A100-SXM-80G"]}})
    running = wait_for(client, victim["id"], {"running"})
    assert running["gpu_type"] == "A100-SXM-80G"
    client.cancel(victim["id"])
    cancelled = wait_for(client, victim["id"], {"cancelled"}, timeout=60)
    assert cancelled["attempts_detail"][-1]["outcome"] == "cancelled"

    job = wait_for(client, oom["id"], {"succeeded", "failed"})
    assert job["state"] == "succeeded", job["failure_reason"]
    first, second = job["attempts_detail"]
    assert first["outcome"] == "oom" and second["outcome"] == "succeeded"
    # what the OOM reported is a need over the card, and the re-plan left room for it on its GPU type
    need = max(first["observed_peak_bytes"])
    assert first["observed_source"] == "oom-error" and need > 3 * 2**30
    assert second["observed_source"] == "measured-cpu"
    assert second["predicted_comparable_bytes"] * first["observed_over_predicted"] <= 0.95 * 3 * 2**30
    lines = [ln["line"] for ln in client.logs(oom["id"])["lines"]]
    assert any("ran out of GPU memory" in ln for ln in lines)
    assert job["progress"]["step"] == 4
    assert_placement_respected(job)
    metrics = client.http.get("/metrics").text
    assert "frenzy_oom_replans_total 1.0" in metrics
    # the re-planned run resumed from the first attempt's checkpoint and still exports the model it trained
    files = download(client, oom["id"], tmp_path)
    assert {"config.json", "frenzy_job.json"} <= files and any(f.endswith(".safetensors") for f in files)
    result = reload_and_evaluate(tmp_path)
    assert result.kind == "model" and abs(result.reloaded_eval_loss - result.trainer_eval_loss) < 1e-3


def test_server_killed_mid_run_loses_nothing(client, server):
    job = client.submit({"model": TINY, "global_batch": 8, "seq_len": 64, "steps": 12})
    wait_for(client, job["id"], {"running"})
    server.kill()
    server.start()  # same store, same Ray cluster
    done = wait_for(client, job["id"], {"succeeded", "failed"})
    assert done["state"] == "succeeded", done["failure_reason"]
    assert done["progress"]["step"] == 12
    # adopted, not restarted: still attempt 1
    assert [a["outcome"] for a in done["attempts_detail"]] == ["succeeded"]
    assert_placement_respected(done)
    assert any("re-attached" in ln["line"] for ln in client.logs(job["id"])["lines"])


def test_gpus_held_outside_frenzy_are_not_offered_and_the_job_waits_for_them(client, ray_view):
    from ray.util.placement_group import placement_group, remove_placement_group

    # Both A10Gs taken by a placement group Frenzy does not know of: Frenzy's bookkeeping says they are
    # free, Ray says they are not. The scheduler goes by Ray, so the job is not placed on GPUs it could
    # not get (before, the attempt waited out Ray Train's start-up timeouts and was lost); /v1/cluster
    # shows them held outside Frenzy. Once the group is removed the job runs, in one attempt.
    outside = placement_group([{"gpu_type:A10G-24G": 1}] * 2)
    ray_view.get(outside.ready(), timeout=60)
    try:
        job = client.submit({"model": TINY, "global_batch": 8, "seq_len": 64, "steps": 3,
                             "limits": {"gpu_types": ["A10G-24G"]}})
        time.sleep(5)
        waiting = client.job(job["id"])
        assert waiting["state"] == "planning" and waiting["attempts_detail"] == [], waiting
        row = client.http.get("/v1/cluster").json()["gpu_types"]["A10G-24G"]
        assert row["free"] == 0 and row["held_outside"] == 2, row
    finally:
        remove_placement_group(outside)
    done = wait_for(client, job["id"], {"succeeded", "failed"})
    assert done["state"] == "succeeded", done["failure_reason"]
    assert [a["outcome"] for a in done["attempts_detail"]] == ["succeeded"] and done["progress"]["step"] == 3
    assert_placement_respected(done)

"""Faults on real Ray (the fake cluster of conftest): a training worker process killed with -9 in
the middle of a run is not the job's fault - the attempt is lost, the job is re-planned and
resumes from its last checkpoint, and succeeds."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.e2e.test_serverless import TINY, assert_placement_respected, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def train_workers(session_dir: str) -> list[int]:
    """Pids of the Ray Train workers of this test's cluster (other clusters on the machine have
    their own session folders)."""
    from frenzy.executor import reaper

    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and reaper.command_line(int(entry)).startswith("ray::RayTrainWorker") \
                and reaper._uses_folder(int(entry), session_dir):
            pids.append(int(entry))
    return sorted(pids)


def test_a_killed_worker_is_replanned_and_resumes_from_its_checkpoint(client, ray_cluster):
    cluster, _home = ray_cluster
    # max_attempts 5: on a busy machine Ray's memory monitor may take an attempt too (also lost, re-planned)
    job = client.submit({"model": TINY, "global_batch": 8, "seq_len": 64, "steps": 14, "limits": {"max_attempts": 5}})
    deadline = time.time() + 300
    while time.time() < deadline:  # past the first checkpoint (every 5 steps)
        seen = client.job(job["id"])
        if seen["state"] == "running" and int(seen["progress"].get("checkpoint_step") or 0) >= 5:
            break
        assert seen["state"] not in ("failed", "succeeded", "cancelled"), seen
        time.sleep(0.5)
    workers = train_workers(cluster.session_dir)
    assert workers, "no Ray Train worker found in the cluster's session"
    attempt = client.job(job["id"])["attempts"]
    os.kill(workers[-1], signal.SIGKILL)
    killed_at = time.time()

    done = wait_for(client, job["id"], {"succeeded", "failed"})
    assert done["state"] == "succeeded", done["failure_reason"]
    attempts = done["attempts_detail"]
    killed = attempts[attempt - 1]
    assert killed["outcome"] == "lost", killed
    assert "WorkerHealthCheckFailedError" in killed["error"] or "ActorDiedError" in killed["error"], killed["error"]
    assert [a["outcome"] for a in attempts] == ["lost"] * (len(attempts) - 1) + ["succeeded"]
    assert done["progress"]["step"] == 14
    lines = [ln["line"] for ln in client.logs(job["id"])["lines"]]
    assert any("was lost" in ln and "re-planning and resuming" in ln for ln in lines)
    # resumed from the checkpoint: the first steps ran once, in attempt 1 only
    assert sum(ln.startswith("step 1/14 ") for ln in lines) == 1, [ln for ln in lines if ln.startswith("step ")]
    assert_placement_respected(done)
    print(f"killed worker {workers[-1]}: job succeeded {time.time() - killed_at:.1f} s later")

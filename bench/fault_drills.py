"""Fault drills on a loopback fake-GPU Ray cluster, with the Frenzy server as a subprocess on it
(an external cluster to the server, as in the end-to-end tests). Each drill submits a few jobs,
waits until they are training past a checkpoint, breaks one thing with SIGKILL, and checks that
every job ends `succeeded` at its last step, none lost or run twice:

- server:  the server process (re-attach to the live attempts after a restart)
- worker:  one Ray Train worker process (the attempt is lost, re-planned, resumed from its checkpoint)
- raylet:  the raylet of the fake node one job runs on (the node is gone; its jobs re-plan elsewhere)

Reports the time to recover and writes its table into docs/BENCHMARKS.md. Bounded: every wait has
a deadline, and the cluster and the server are stopped however the drill ends.

    .venv/bin/python bench/fault_drills.py [--drills server,worker,raylet] [--jobs 3]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from report import write_section  # noqa: E402

TINY = str(ROOT / "examples" / "tiny-llama" / "config.json")
# Three GPU types: a node can leave and every job still has somewhere to go.
NODES = "A100-SXM-80G:2:6GiB,A10G-24G:2:3GiB,A10G-24G:2:3GiB,T4-16G:2:2GiB"
STEPS = 14  # checkpoints every 5 steps; 1 s a step (--step-delay)
DEADLINE_S = 420


def wait(predicate, timeout: float, what: str, every: float = 0.5):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise TimeoutError(f"{what}: not after {timeout:.0f} s")


def train_workers(session_dir: str) -> list[int]:
    from frenzy.executor import reaper

    return sorted(int(e) for e in os.listdir("/proc") if e.isdigit()
                  and reaper.command_line(int(e)).startswith("ray::RayTrainWorker")
                  and reaper._uses_folder(int(e), session_dir))


def submit_and_wait_checkpointed(client, jobs: int) -> list[str]:
    ids = [client.submit({"model": TINY, "global_batch": 8, "seq_len": 64, "steps": STEPS,
                          "name": f"drill-{i}", "limits": {"max_attempts": 5}})["id"] for i in range(jobs)]

    def checkpointed():
        seen = [client.job(i) for i in ids]
        bad = [j for j in seen if j["state"] in ("failed", "cancelled")]
        if bad:
            raise RuntimeError(f"{bad[0]['id']} {bad[0]['state']}: {bad[0]['failure_reason']}")
        return all(j["state"] == "running" and int(j["progress"].get("checkpoint_step") or 0) >= 5 for j in seen)

    wait(checkpointed, DEADLINE_S, "jobs running past their first checkpoint")
    return ids


def _latest(folder: Path) -> int | None:
    try:
        return int((folder / "latest").read_text().strip())
    except (OSError, ValueError):
        return None


def outcome(client, ids: list[str], t_fault: float, storage: Path) -> dict:
    """Wait for every job to end; what happened to each."""
    done = wait(lambda: (lambda js: js if all(j["state"] in ("succeeded", "failed", "cancelled") for j in js)
                         else None)([client.job(i) for i in ids]), DEADLINE_S, "every job ended", every=1.0)
    t_end = time.time()
    attempts = {j["id"]: [a["outcome"] for a in j["attempts_detail"]] for j in done}
    # trained to the last step: reported, or (a lost attempt's workers finished before they were
    # declared lost, so the re-planned attempt resumed at the end) the job's last checkpoint
    last = {j["id"]: _latest(storage / j["id"] / "checkpoints") for j in done}
    ok = all(j["state"] == "succeeded" and STEPS in (j["progress"].get("step"), last[j["id"]]) for j in done)
    unreported = [j["id"] for j in done if j["progress"].get("step") != STEPS]
    once = all(o.count("succeeded") == 1 for o in attempts.values())
    total = len(client.jobs())
    return {"ok": ok, "once": once, "attempts": attempts, "all_done_s": t_end - t_fault, "jobs_in_store": total,
            "failures": [j["failure_reason"] for j in done if j["state"] != "succeeded"],
            "unreported": [f"{i}: last reported step {j['progress'].get('step')}, checkpoint step {last[i]}"
                           for j in done for i in [j["id"]] if i in unreported]}


def drill_server(server, client, cluster, jobs: int) -> dict:
    ids = submit_and_wait_checkpointed(client, jobs)
    t = time.time()
    server.kill()
    server.start()
    healthy = time.time() - t
    reattached = wait(lambda: all(any("re-attached" in ln["line"] for ln in client.logs(i)["lines"]) for i in ids)
                      and time.time() - t, 60, "re-attached")
    result = outcome(client, ids, t, server.home / "jobs")
    result.update(recover_s=reattached, detail=f"server back (healthy) {healthy:.1f} s after kill -9, all "
                  f"{jobs} attempts re-attached at {reattached:.1f} s")
    return result


def _back_running(client, ids: list[str], before: dict[str, int]):
    """Seconds until every job whose attempt was lost runs a later attempt (None while not)."""
    jobs = [client.job(i) for i in ids]
    hit = [j for j in jobs if j["attempts"] > before[j["id"]]]
    if not hit:
        return None
    return all(j["state"] in ("running", "succeeded") for j in hit) and hit


def drill_worker(server, client, cluster, jobs: int) -> dict:
    ids = submit_and_wait_checkpointed(client, jobs)
    before = {i: client.job(i)["attempts"] for i in ids}
    workers = train_workers(cluster.session_dir)
    t = time.time()
    os.kill(workers[len(workers) // 2], signal.SIGKILL)
    hit = wait(lambda: _back_running(client, ids, before), DEADLINE_S, "lost attempt running again")
    recover = time.time() - t
    result = outcome(client, ids, t, server.home / "jobs")
    errors = [a["error"] for j in hit for a in client.job(j["id"])["attempts_detail"] if a["outcome"] == "lost"]
    result.update(recover_s=recover, detail=f"1 of {len(workers)} worker processes killed; {len(hit)} job(s) lost an "
                  f"attempt ({(errors or ['?'])[0][:90]}), running a re-planned attempt {recover:.1f} s later")
    return result


def drill_raylet(server, client, cluster, jobs: int) -> dict:
    ids = submit_and_wait_checkpointed(client, jobs)
    before = {i: client.job(i)["attempts"] for i in ids}
    nodes = [n for j in ids for n, _ in client.job(j)["attempts_detail"][-1]["allocation"]]
    victim = next(n for n in nodes if n != "head")
    pid = cluster.raylet_pid(victim)
    t = time.time()
    os.kill(pid, signal.SIGKILL)
    hit = wait(lambda: _back_running(client, ids, before), DEADLINE_S, "lost attempts running again")
    recover = time.time() - t
    result = outcome(client, ids, t, server.home / "jobs")
    moved = [client.job(j["id"])["attempts_detail"][-1]["allocation"] for j in hit]
    result.update(recover_s=recover, detail=f"raylet of {victim} killed; {len(hit)} job(s) lost an attempt and ran "
                  f"again {recover:.1f} s later on {moved}")
    return result


NOTES = """
What a raylet kill does on the fake cluster: Ray declares the node dead some 10-15 s later (GCS
health checks); until then the node's workers keep training and reporting (actor calls go from
worker to worker, not through the raylet). Then their Ray Train controller's health check fails
with `WorkerHealthCheckFailedError` around `ActorDiedError`: the attempt is `lost` and the job is
re-planned on the nodes left. The dead node's worker processes may still finish a step or two and
write a checkpoint before they notice their raylet is gone (a real dead node takes them with it;
a partitioned one would not): a re-planned attempt then resumes from that checkpoint, which can be
the last step ("not reported" above: the job succeeded at its last checkpoint without reporting
the steps the old workers ran). Fencing those writes (a worker checking that its attempt is still
the job's current one before it saves) belongs in `frenzy.train.checkpoint`.
"""


DRILLS = {"server": drill_server, "worker": drill_worker, "raylet": drill_raylet}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--drills", default="server,worker,raylet")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="frenzy-drills-"))
    os.environ["RAY_AUTH_TOKEN_PATH"] = str(home / "ray_auth_token")
    os.environ.pop("RAY_AUTH_MODE", None)
    os.environ["RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S"] = "15"  # a node that left: lost in 3 x 15 s
    from frenzy.executor.fake_cluster import FakeCluster, parse_nodes
    from tests.e2e.conftest import Server

    rows = []
    for name in args.drills.split(","):
        cluster = FakeCluster(parse_nodes(NODES), state_dir=home / "clusters")  # a fresh cluster per drill
        cluster.start()
        server = Server(cluster.address, home / name)
        (home / name).mkdir()
        try:
            server.start()
            from frenzy.cli.client import Client

            result = DRILLS[name](server, Client(server.url), cluster, args.jobs)
        except Exception as exc:  # say exactly what happened, go on with the next drill
            result = {"ok": False, "once": False, "recover_s": float("nan"), "all_done_s": float("nan"),
                      "detail": f"{type(exc).__name__}: {exc}", "attempts": {}, "jobs_in_store": "?", "failures": []}
        finally:
            server.stop()
            cluster.stop()
        print(name, result, flush=True)
        rows.append((name, result))
    table = ("| drill (kill -9 of) | every job succeeded at its last step | none run twice | jobs | "
             "time to recover | all jobs done after the fault | what happened |\n| --- | --- | --- | --- | --- | --- | --- |\n")
    for name, r in rows:
        outcomes = "; ".join(",".join(o) for o in r["attempts"].values())
        table += (f"| {name} | {'yes' if r['ok'] else 'NO'} | {'yes' if r['once'] else 'NO'} | {r['jobs_in_store']} "
                  f"| {r['recover_s']:.1f} s | {r['all_done_s']:.1f} s | {r['detail']}; attempts: {outcomes}"
                  f"{'; failures: ' + '; '.join(r['failures']) if r['failures'] else ''}"
                  f"{'; not reported: ' + '; '.join(r['unreported']) if r.get('unreported') else ''} |\n")
    print(table)
    write_section("fault_drills", "## Fault drills on the fake cluster\n\n"
                  f"Fake cluster `{NODES}` on loopback, the server a subprocess on it (external cluster, "
                  f"`--step-delay 1.0`), {args.jobs} jobs of {STEPS} steps each (tiny Llama, checkpoint every 5 "
                  "steps), each fault injected with SIGKILL once every job is training past its first "
                  "checkpoint. Time to recover: server - until every attempt is re-attached; worker and "
                  "raylet - until every job that lost its attempt runs a re-planned one.\n\n" + table + NOTES,
                  command="python bench/fault_drills.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()

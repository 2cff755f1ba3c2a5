"""Control-plane benchmarks: the loop's time per step with 1,000 queued jobs, API submit
throughput on loopback, and submit-to-placed latency (Ray worker start excluded: the executor
here accepts a launch in-process, which is what RayExecutor.submit's asynchronous actor creation
costs the loop). Writes its table into docs/BENCHMARKS.md.

    .venv/bin/python bench/control_loop.py [--jobs 1000] [--submits 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from report import write_section  # noqa: E402

from frenzy.control.loop import ControlLoop, LoopSettings  # noqa: E402
from frenzy.control.ports import NodeInfo, SystemClock  # noqa: E402
from frenzy.control.request import JobRequest  # noqa: E402
from frenzy.control.service import ControlService  # noqa: E402
from frenzy.control.store import SqlJobStore  # noqa: E402
from frenzy.core import catalog  # noqa: E402
from frenzy.core.units import GiB  # noqa: E402

TINY = str(ROOT / "examples" / "tiny-llama" / "config.json")


class AcceptingExecutor:
    """Accepts every launch at once and never finishes it: the cluster fills, the queue stays."""

    def __init__(self, nodes):
        self._nodes = nodes
        self.launched = 0

    def nodes(self):
        return self._nodes

    def free_gpus(self):
        return None  # no cluster beside the bookkeeping: all of it is Frenzy's

    def check_feasible(self, launch):
        return None

    def submit(self, launch):
        self.launched += 1

    def poll(self):
        return []

    def cancel(self, job_id, attempt):
        pass

    def is_running(self, job_id, attempt):
        return True

    def adopt(self, job_id, attempt):
        pass


def cluster() -> list[NodeInfo]:
    types = [("A100-SXM-80G", 6 * GiB), ("A10G-24G", 3 * GiB), ("T4-16G", 2 * GiB)]
    return [NodeInfo(name=f"{name.lower()}-{i}", gpu_type=replace(catalog.gpu_type(name), memory_bytes=mem), gpus=8)
            for name, mem in types for i in range(4)]  # 12 nodes, 96 GPUs


def request(i: int) -> JobRequest:
    return JobRequest.from_json({"model": TINY, "global_batch": [8, 16, 32, 64][i % 4], "seq_len": [128, 256][i % 2],
                                 "steps": 100, "priority": i % 3})


def bench_loop(jobs: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        store = SqlJobStore(f"sqlite:///{tmp}/f.db")
        executor = AcceptingExecutor(cluster())
        loop = ControlLoop(store=store, executor=executor, clock=SystemClock(),
                           settings=LoopSettings(storage_root=Path(tmp)))
        for i in range(jobs):
            r = request(i)
            store.create_job(name=r.display_name(), request=r.to_json(), priority=r.priority, now=time.time())
        t = time.perf_counter()
        loop.step()  # plans every job once (cached afterwards) and fills the cluster
        first = time.perf_counter() - t
        steady = []
        for _ in range(10):
            t = time.perf_counter()
            report = loop.step()
            steady.append(time.perf_counter() - t)
        return {"first_s": first, "steady_s": statistics.median(steady), "placed": executor.launched,
                "waiting": report.waiting}


def _serve(tmp: str, loop_running: bool, db_url: str | None = None, auth=None):
    """The real app, store and loop on a loopback port (`auth`: frenzy.control.auth.AuthSettings)."""
    import uvicorn

    from frenzy.cli.client import Client
    from frenzy.control.api import create_app
    from frenzy.control.inputs import InputPolicy

    store = SqlJobStore(db_url or f"sqlite:///{tmp}/f.db")
    executor = AcceptingExecutor(cluster())
    loop = ControlLoop(store=store, executor=executor, clock=SystemClock(), settings=LoopSettings(storage_root=Path(tmp)))
    service = ControlService(store=store, executor=executor, clock=SystemClock(), loop=loop, tick_s=0.5,
                             inputs=InputPolicy(roots=(ROOT / "examples",)))  # as `frenzy serve --data-root examples`
    server = uvicorn.Server(uvicorn.Config(create_app(service, auth=auth), host="127.0.0.1", port=0,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    if loop_running:
        service.start()
    port = server.servers[0].sockets[0].getsockname()[1]

    def stop():
        service.stop()
        server.should_exit = True
        thread.join(10)
        store.close()

    return Client(f"http://127.0.0.1:{port}"), store, stop


def bench_api(submits: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:  # throughput: the API and store alone
        client, _, stop = _serve(tmp, loop_running=False)
        body = request(0).to_json()
        t = time.perf_counter()
        for _ in range(submits):
            client.submit(body)
        throughput = submits / (time.perf_counter() - t)
        stop()
    with tempfile.TemporaryDirectory() as tmp:  # latency: the loop running as in `frenzy serve`, idle cluster
        client, store, stop = _serve(tmp, loop_running=True)
        latencies = []
        for _ in range(20):
            job_id = client.submit(request(1).to_json())["id"]
            while (job := store.get_job(job_id)).placed_at is None:
                time.sleep(0.002)
            latencies.append(job.placed_at - job.submitted_at)
        stop()
    return {"submits_per_s": throughput, "latency_p50_s": statistics.median(latencies),
            "latency_max_s": max(latencies)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--submits", type=int, default=200)
    args = parser.parse_args()
    loop = bench_loop(args.jobs)
    api = bench_api(args.submits)
    table = (
        "| measure | value |\n| --- | --- |\n"
        f"| control-loop step, {args.jobs} queued jobs, first step (MARP plans every job, fills 96 GPUs) "
        f"| {loop['first_s']:.2f} s ({loop['placed']} placed) |\n"
        f"| control-loop step, {loop['waiting']} jobs waiting, steady state (plans cached) "
        f"| {loop['steady_s'] * 1000:.0f} ms (median of 10) |\n"
        f"| API submit throughput, loopback, sequential client, SQLite WAL (each submit plans the job) "
        f"| {api['submits_per_s']:.1f} jobs/s |\n"
        f"| submit-to-placed latency, idle cluster, Ray worker start excluded (p50 / max of 20) "
        f"| {api['latency_p50_s'] * 1000:.0f} ms / {api['latency_max_s'] * 1000:.0f} ms |\n")
    print(table)
    write_section("control_loop", "## Control plane\n\nWall clock, real SQLite store (first step: ~3 store writes per newly planned job); the executor accepts "
                  "launches in-process (no Ray), so these numbers are the control plane's own cost.\n\n" + table,
                  command=f".venv/bin/python bench/control_loop.py --jobs {args.jobs} --submits {args.submits}")


if __name__ == "__main__":
    main()

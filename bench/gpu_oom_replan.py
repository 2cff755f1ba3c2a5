"""The OOM re-plan path on a real GPU: the control loop, its SQLite store and the real training
worker, with the card's own allocator raising `torch.OutOfMemoryError`.

The one GPU is offered to the planner as a smaller card (`--card-gib`, default 24): the worker
caps itself there with `torch.cuda.set_per_process_memory_fraction` (frenzy.train.memory). The job
asks for `emulation.peak_factor` (default 1.3): from step 2 on the worker holds a real buffer of
(factor - 1) x MARP's prediction, as an unmodelled buffer would, so the first plan, chosen to fit
MARP's prediction, runs out of memory for real. The loop records the OOM, learns the observed need,
re-plans with more headroom and resumes from the checkpoint, and the job must end `succeeded`.

Ray is the executor everywhere else. Here a minimal executor runs each attempt as a local process
(rank 0 of a one-rank NCCL group, `train_loop` with a report callback), because this script must
also run where only PyTorch and transformers are installed. `--cpu` runs the same flow on CPU with
the fake-GPU OOM hook, as a smoke test.

    python bench/gpu_oom_replan.py --out oom_replan.json
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from frenzy.control.loop import ControlLoop, LoopSettings  # noqa: E402
from frenzy.control.ports import Finished, NodeInfo, Progress, SystemClock  # noqa: E402
from frenzy.control.request import JobRequest  # noqa: E402
from frenzy.control.states import AttemptOutcome, JobState  # noqa: E402
from frenzy.control.store import SqlJobStore  # noqa: E402
from frenzy.core import catalog  # noqa: E402
from frenzy.core.units import GiB  # noqa: E402
from frenzy.train.memory import peak_from_error  # noqa: E402


class LocalProcessExecutor:
    """One node, attempts as child processes; events come back as JSON lines in a file."""

    def __init__(self, node: NodeInfo, folder: Path):
        self.node, self.folder = node, folder
        self.running: dict[tuple[str, int], tuple[subprocess.Popen, Path, int]] = {}

    def nodes(self):
        return [self.node]

    def free_gpus(self):
        return None  # no cluster beside the bookkeeping: all of it is Frenzy's

    def check_feasible(self, launch):
        fits = all(name == self.node.name and gpus <= self.node.gpus for name, gpus in launch.allocation)
        return None if fits else f"only {self.node.gpus} GPU(s) on {self.node.name}"

    def submit(self, launch):
        key = (launch.job_id, launch.attempt)
        events = self.folder / f"{launch.job_id}-{launch.attempt}.jsonl"
        events.write_text("")
        config = self.folder / f"{launch.job_id}-{launch.attempt}.json"
        config.write_text(json.dumps(launch.worker_config))
        child = subprocess.Popen([sys.executable, __file__, "--child", str(config), "--events", str(events)])
        self.running[key] = (child, events, 0)

    def poll(self):
        out = []
        for key, (child, events, seen) in list(self.running.items()):
            done = child.poll() is not None
            lines = events.read_text().splitlines()
            for line in lines[seen:]:
                out.append(self._event(key, json.loads(line)))
            self.running[key] = (child, events, len(lines))
            if done:
                del self.running[key]
                if not any(json.loads(ln)["kind"] == "finished" for ln in lines):
                    out.append(Finished(job_id=key[0], attempt=key[1], outcome=AttemptOutcome.FAILED,
                                        error=f"worker exited with {child.returncode}"))
        return out

    @staticmethod
    def _event(key, event):
        if event["kind"] == "progress":
            metrics = {k: v for k, v in event.items() if k not in ("kind", "step")}
            metrics["peak_bytes"] = [int(event["peak_bytes"])]
            return Progress(job_id=key[0], attempt=key[1], step=int(event["step"]), metrics=metrics)
        outcome = AttemptOutcome(event["outcome"])
        peak = peak_from_error(event["error"]) if outcome is AttemptOutcome.OOM else None
        return Finished(job_id=key[0], attempt=key[1], outcome=outcome, error=event["error"],
                        peak_bytes=(peak,) if peak else (), peak_source="oom-lower-bound" if peak else "")

    def cancel(self, job_id, attempt):
        entry = self.running.pop((job_id, attempt), None)
        if entry:
            entry[0].kill()

    def is_running(self, job_id, attempt):
        return (job_id, attempt) in self.running

    def adopt(self, job_id, attempt):
        pass


def run_child(config_path: str, events_path: str) -> None:
    """One attempt: rank 0 of a one-rank process group running the real worker loop."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    from frenzy.executor.failures import classify
    from frenzy.train.worker import train_loop

    with open(events_path, "a") as events:
        def emit(event: dict) -> None:
            events.write(json.dumps(event) + "\n")
            events.flush()

        try:
            train_loop(json.loads(Path(config_path).read_text()), report=lambda m: emit({"kind": "progress", **m}))
            emit({"kind": "finished", "outcome": "succeeded", "error": ""})
        except Exception as exc:  # what Ray Train would hand the runner
            outcome, error = classify(exc)
            emit({"kind": "finished", "outcome": outcome, "error": error})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="Qwen/Qwen2.5-0.5B")
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--global-batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--card-gib", type=float, default=24.0, help="the smaller card the GPU emulates")
    parser.add_argument("--peak-factor", type=float, default=1.3)
    parser.add_argument("--cpu", action="store_true", help="fake-GPU smoke test on CPU")
    parser.add_argument("--out", help="JSON with every attempt")
    parser.add_argument("--timeout", type=float, default=480)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--events", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return run_child(args.child, args.events)
    if not args.card_gib > 0:
        parser.error(f"--card-gib must be a positive size in GiB, got {args.card_gib}")

    folder = Path(tempfile.mkdtemp(prefix="frenzy-oom-"))
    gpu = replace(catalog.gpu_type("H100-SXM-80G"), memory_bytes=int(args.card_gib * GiB))
    executor = LocalProcessExecutor(NodeInfo(name="gpu-0", gpu_type=gpu, gpus=1), folder)
    store = SqlJobStore(f"sqlite:///{folder / 'frenzy.db'}")
    loop = ControlLoop(store=store, executor=executor, clock=SystemClock(),
                       settings=LoopSettings(storage_root=folder / "jobs", fake_gpu=args.cpu, checkpoint_every=5))
    request = JobRequest.from_json({"model": args.model, "global_batch": args.global_batch, "seq_len": args.seq_len,
                                    "steps": args.steps, "limits": {"max_gpus": 1},
                                    "emulation": {"peak_factor": args.peak_factor}})
    job = store.create_job(name=request.display_name(), request=request.to_json(), priority=0, now=time.time())
    deadline = time.time() + args.timeout
    while time.time() < deadline and not store.get_job(job.id).state.is_terminal:
        loop.step()
        time.sleep(0.5)
    job = store.get_job(job.id)
    attempts = [{"attempt": a.number, "outcome": a.outcome.value, "plan": a.choice.get("describe"),
                 "predicted_device_gib": round(a.predicted_device_bytes / GiB, 2),
                 "observed_peak_gib": round(max(a.observed_peak_bytes) / GiB, 2) if a.observed_peak_bytes else None,
                 "error": a.error.strip().splitlines()[-1][:300] if a.error else ""}
                for a in store.attempts(job.id)]
    logs = [line for _, _, line in store.logs(job.id)]
    report = {"card_gib": args.card_gib, "peak_factor": args.peak_factor, "model": args.model,
              "state": job.state.value, "attempts": attempts, "logs": logs}
    print(json.dumps(report, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))
    if job.state is not JobState.SUCCEEDED:
        raise SystemExit(f"job ended {job.state.value}, not succeeded")


if __name__ == "__main__":
    main()

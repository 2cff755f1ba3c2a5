"""`make demo`: Frenzy's main job, end to end on this machine.

Starts a local fake heterogeneous Ray cluster (three GPU types, CPU workers), the Frenzy server
with SQLite, and submits three jobs with no GPU counts through the HTTP API: a LoRA fine-tune of a
small chat model on the instruction data shipped in examples/, a full fine-tune that runs out of
memory on purpose and is re-planned, and GPT-2 LoRA. It shows plans, placements and live progress
(observed peaks are the workers' measured live tensor bytes), then downloads what the fine-tunes
handed back, reloads it with peft / transformers and prints its validation loss next to the
trainer's. It stops every process it started. `python -m frenzy.demo --plans-only` prints plans
for three large models without starting anything.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml
from rich.console import Console
from rich.live import Live
from rich.table import Table

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CLUSTER = "demo"  # A100-SXM-80G x2 (6 GiB emulated), A10G-24G x4 (3 GiB), T4-16G x2 (2 GiB)
console = Console(width=None if Console().is_terminal else 130)


def _spec(file: str, **over) -> dict:
    path = EXAMPLES / file
    body = yaml.safe_load(path.read_text())
    for key in ("model", "dataset"):
        local = path.parent / str(body.get(key, ""))
        if body.get(key) and body[key] != "synthetic" and local.exists():
            body[key] = str(local.resolve())
    return {**body, **over}


def demo_jobs() -> list[dict]:
    return [
        _spec("chat-sft.yaml", name="tiny-chat-sft"),
        # Asks for the cheap type only and needs 2.2x the tensor bytes its worker measures (as an
        # unmodelled buffer would): it runs out of memory at its second step and is re-planned.
        _spec("tiny-llama.yaml", name="tiny-llama-oom", limits={"gpu_types": ["A10G-24G"], "max_gpus": 1},
              emulation={"peak_factor": 2.2}),
        _spec("gpt2-lora.yaml", name="gpt2-lora"),
    ]


def adapter_job(base: Path) -> dict:
    """LoRA on the downloaded fine-tune: its folder has weights, so the adapter is also merged into them."""
    return _spec("chat-lora.yaml", name="tiny-chat-lora", model=str(base), merge_lora=True)


def _gib(n) -> str:
    return f"{n / 2**30:.2f}" if n else "-"


def _plans_table(name: str, plans: list[dict]) -> Table:
    table = Table("GPUs", "GPU type", "plan", "predicted GiB/GPU", "GPU GiB", title=f"plans for {name} (best first)")
    for p in plans[:4]:
        table.add_row(str(p["num_gpus"]), p["gpu_type"], p["describe"], _gib(p["memory"]["device_bytes"]),
                      _gib(p["gpu_memory_bytes"]))
    return table


def _progress_table(jobs: list[dict]) -> Table:
    table = Table("job", "state", "attempt", "placed on", "step", "loss", "predicted GiB", "measured GiB",
                  title="jobs (memory: tensors MARP predicts vs live tensor bytes the worker measures)")
    for j in jobs:
        peaks = j["progress"].get("peak_bytes") or []
        where = ", ".join(f"{n}:{g}" for n, g in j["placement"]) or "-"
        loss = str(j.get("loss") or "-") + (f" (eval {j['eval_loss']})" if j.get("eval_loss") is not None else "")
        table.add_row(j["name"], j["state"], str(j["attempts"]), f"{j['plan'] or '-'} @ {where}",
                      f"{j.get('step') or 0}/{j.get('total_steps') or '?'}", loss,
                      _gib(j["chosen_plan"]["memory"]["allocated_bytes"]) if j["chosen_plan"] else "-",
                      _gib(max(peaks)) if peaks else "-")
    return table


def _summary(client, ids: list[str], started: float) -> Table:
    table = Table("job", "state", "attempts", "final plan", "predicted GiB", "observed GiB", "observed / predicted",
                  "steps", "loss", "submit→placed s", title=f"summary ({time.time() - started:.0f} s)")
    for job_id in ids:
        j = client.job(job_id)
        last = j["attempts_detail"][-1] if j["attempts_detail"] else {}
        outcomes = " → ".join(a["outcome"] for a in j["attempts_detail"])
        table.add_row(j["name"], j["state"], outcomes, f"{j['num_gpus']}x {j['gpu_type']} {j['plan']}",
                      _gib(last.get("predicted_comparable_bytes")), _gib(max(last.get("observed_peak_bytes") or [0])),
                      str(last.get("observed_over_predicted") or "-"), str(j.get("step") or 0),
                      str(j.get("loss") or "-"), f"{j['timings']['submit_to_placed_s']:.2f}")
    return table


def _port(preferred: int) -> int:
    """The API's default port, or a free one if something already listens there."""
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", preferred))
            return preferred
        except OSError:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]


def run(timeout_s: float = 900) -> int:
    import uvicorn

    from frenzy.cli.client import Client
    from frenzy.control.server import ServerSettings, build

    home = Path(tempfile.mkdtemp(prefix="frenzy-demo-"))
    (home / "downloads").mkdir()
    settings = ServerSettings(port=_port(8000), db_url=f"sqlite:///{home / 'frenzy.db'}", fake_nodes=CLUSTER,
                              storage_root=home / "jobs",
                              # the jobs' models and data, and the downloaded fine-tune the LoRA job starts from
                              data_roots=(EXAMPLES, home / "downloads"))
    console.rule("[bold]Frenzy demo: serverless LLM training on a fake heterogeneous Ray cluster")
    console.print(f"starting a local Ray cluster ({CLUSTER}) and the server (SQLite at {home / 'frenzy.db'}) …")
    service, app, cleanup, address = build(settings)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=settings.port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    try:
        service.start()
        thread.start()
        client = Client(f"http://127.0.0.1:{settings.port}")
        while not client.healthy():
            time.sleep(0.2)
        cluster = client.cluster()
        console.print("cluster: " + ", ".join(f"{n['name']} {n['total_gpus']}x {n['gpu_type']} "
                                               f"({_gib(n['gpu_memory_bytes'])} GiB each)" for n in cluster["nodes"]))
        started = time.time()
        ids = _run_jobs(client, demo_jobs(), started, timeout_s)
        ok = all(client.job(i)["state"] == "succeeded" for i in ids)
        if ok:  # the fine-tuned chat model comes back as a folder, and is the base of a LoRA fine-tune
            base = _download(client, ids[0], home / "downloads")
            console.rule(f"[bold]a LoRA fine-tune of the model {ids[0]} handed back ({base})")
            ids += _run_jobs(client, [adapter_job(base)], started, timeout_s)
            ok = client.job(ids[-1])["state"] == "succeeded"
        console.print(_summary(client, ids, started))
        if ok:
            ok = _check_artifacts(client, ids, home / "downloads")
        console.print("[green]all jobs succeeded[/]" if ok else "[red]some jobs did not succeed[/]")
        return 0 if ok else 1
    finally:
        console.print("stopping the server and the Ray cluster …")
        server.should_exit = True
        thread.join(timeout=30)
        cleanup()


def _run_jobs(client, specs: list[dict], started: float, timeout_s: float) -> list[str]:
    """Submit (no GPU count in any spec), show plans, then follow the jobs live until they end."""
    ids = []
    for spec in specs:
        created = client.submit(spec)
        ids.append(created["id"])
        console.print(_plans_table(spec["name"], created["plans"]))
    with Live(console=console, refresh_per_second=2) as live:
        seen: dict[str, int] = {}
        while time.time() - started < timeout_s:
            jobs = [client.job(i) for i in ids]
            for j in jobs:
                logs = client.logs(j["id"], seen.get(j["id"], 0))
                seen[j["id"]] = logs["next_after"]
                for line in logs["lines"]:
                    if line["line"].startswith("[frenzy]"):
                        live.console.print(f"[dim]{j['name']}:[/] {line['line'][9:]}")
            live.update(_progress_table(jobs))
            if all(j["state"] in ("succeeded", "failed", "cancelled") for j in jobs):
                break
            time.sleep(1)
    return ids


def _download(client, job_id: str, folder: Path) -> Path:
    target = folder / job_id
    for f in client.artifacts(job_id)["files"]:
        client.download(job_id, f["path"], target)
    return target


def _check_artifacts(client, ids: list[str], folder: Path) -> bool:
    """Download what each fine-tune handed back, reload it with peft / transformers, and score it on
    the job's validation set the way the trainer did."""
    from transformers.utils import logging as hf_logging

    from frenzy.train.config import MERGED
    from frenzy.train.reload import reload_and_evaluate

    hf_logging.disable_progress_bar()
    table = Table("job", "artifact", "files", "eval loss: first", "trainer (last)", "reloaded", "|difference|",
                  title="artifacts, downloaded and reloaded with peft / transformers")
    ok = True
    for job_id in ids:
        target = _download(client, job_id, folder)
        files = len(client.artifacts(job_id)["files"])
        for merged in (False, True) if (target / MERGED).is_dir() else (False,):
            result = reload_and_evaluate(target, merged)
            if result.reloaded_eval_loss is None:
                table.add_row(result.name, result.kind, str(files), "-", "-", "-", "-")
                continue
            gap = abs(result.reloaded_eval_loss - result.trainer_eval_loss)
            ok &= gap < 1e-3
            table.add_row(result.name, result.kind, str(files), f"{result.first_eval_loss:.4f}",
                          f"{result.trainer_eval_loss:.4f}", f"{result.reloaded_eval_loss:.4f}", f"{gap:.1e}")
    console.print(table)
    console.print(f"downloaded into {folder}; load them with peft's PeftModel.from_pretrained or transformers' "
                  "AutoModelForCausalLM.from_pretrained")
    return ok


def plans_only() -> None:
    from frenzy.cli.render import plans_table
    from frenzy.core import catalog
    from frenzy.core.hf_config import load_model
    from frenzy.core.job import JobSpec
    from frenzy.core.training import Method, TrainingConfig
    from frenzy.memory.plans import plan_job

    gpus = list(catalog.gpu_types().values())
    for name, batch, seq, method in [("meta-llama/Llama-3.1-8B", 64, 4096, Method.FULL),
                                     ("Qwen/Qwen2.5-14B", 32, 2048, Method.LORA),
                                     ("mistralai/Mixtral-8x7B-v0.1", 64, 4096, Method.FULL)]:
        job = JobSpec(model=load_model(name), training=TrainingConfig(method=method), seq_len=seq, global_batch=batch)
        console.print(job.model.summary())
        console.print(plans_table(f"frenzy plan {name} --global-batch {batch} --seq {seq} --method {method.value}",
                                  plan_job(job, gpus)[:8]))


def main() -> None:
    if "--plans-only" in sys.argv:
        plans_only()
        return
    sys.exit(run())


if __name__ == "__main__":
    main()

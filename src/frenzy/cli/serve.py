"""`frenzy serve | submit | jobs | status | logs | cancel | cluster | ray-node-args` (and `artifacts`, beside).

Module-level imports stay light (typer, rich): server, Ray and HTTP code load inside commands.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from frenzy.cli.options import GpuCatalog, use_gpu_catalog
from frenzy.cli.output import Json, choices, console, emit, fail
from frenzy.cli.spec_file import read_spec
from frenzy.control.states import JobState

StateChoice = choices(JobState)
Url = Annotated[Optional[str], typer.Option("--url", help="server URL (default $FRENZY_URL or http://127.0.0.1:8000)")]
TERMINAL = ("succeeded", "failed", "cancelled")


def _client(url):
    from frenzy.cli.client import Client
    return Client(url)


def _call(fn, *args, **kwargs):
    from frenzy.cli.client import ApiError
    try:
        return fn(*args, **kwargs)
    except ApiError as exc:  # status: the HTTP status, 0 when no answer came (with --json, for scripts)
        raise fail(exc.detail, status=exc.status) from None


def _gib(n) -> str:
    return f"{n / 2**30:.2f} GiB" if n else "-"


def serve(host: Annotated[str, typer.Option(help="bind address (loopback by default)")] = "127.0.0.1",
          port: int = 8000,
          db_url: Annotated[Optional[str], typer.Option(help="SQLAlchemy URL (default $FRENZY_DB_URL or "
                                                           "sqlite ~/.frenzy/frenzy.db)")] = None,
          ray_address: Annotated[Optional[str], typer.Option(help="existing Ray cluster HOST:PORT")] = None,
          fake_cluster: Annotated[Optional[str], typer.Option(
              help="start a local fake-GPU Ray cluster: a preset (demo, two-types) or TYPE:GPUS[:MEMORY],...")] = None,
          fake_gpu: Annotated[bool, typer.Option("--fake-gpu", help="the --ray-address cluster is a fake-GPU "
                                                 "one: CPU workers, gloo, emulated memory")] = False,
          step_delay: Annotated[float, typer.Option(hidden=True, help="fake mode: sleep per step (tests)")] = 0.0,
          storage: Annotated[Path, typer.Option(help="checkpoints and Ray Train results")] = Path("~/.frenzy/jobs"),
          policy: Annotated[str, typer.Option(help="scheduling policy")] = "frenzy",
          metrics_auth: Annotated[bool, typer.Option(
              "--metrics-auth/--no-metrics-auth", help="/metrics needs an admin's token whenever the API needs "
                                                       "tokens (--no-metrics-auth: open, for a scraper without one)")] = True,
          data_root: Annotated[Optional[list[Path]], typer.Option(
              "--data-root", metavar="DIR", help="a folder whose files (models, data) jobs may name; repeatable, also "
                                  "$FRENZY_DATA_ROOTS. None by default: only catalog names, the local Hugging "
                                  "Face cache and inline configs")] = None,
          max_data_bytes: Annotated[Optional[int], typer.Option(
              min=1, help="largest data file the server reads (default 1 GiB)")] = None,
          max_body_bytes: Annotated[int, typer.Option(min=1, help="largest request body; 413 beyond")] = 1 << 20,
          max_check_memory_bytes: Annotated[Optional[int], typer.Option(
              min=1, help="memory one submission's data check may use, in its own process (default 2 GiB); "
                          "checks beyond it are refused with a 422")] = None,
          max_check_seconds: Annotated[Optional[float], typer.Option(
              min=0.001, help="time one submission's data check may take (default 300 s)")] = None,
          gpu_catalog: GpuCatalog = None) -> None:
    """Run the API server and control loop (Ctrl-C stops it; running attempts keep going on Ray).

    Beyond loopback (--host 0.0.0.0) every request needs an API token, and the server refuses to start
    until one exists: `frenzy token create --user NAME --admin` first."""
    import os

    from frenzy.control.data_process import CheckLimits
    from frenzy.control.server import ServerSettings
    from frenzy.control.server import serve as run
    from frenzy.core import catalog

    use_gpu_catalog(gpu_catalog)  # the planner, control loop and executor run in this process
    if catalog.user_gpu_catalog():
        # Processes started from here (a local Ray cluster's raylets and workers) inherit the environment,
        # so anything there that looks a GPU type up sees the same catalog.
        os.environ[catalog.GPU_CATALOG_ENV] = str(Path(catalog.user_gpu_catalog()).expanduser().resolve())

    given = {"memory_bytes": max_check_memory_bytes, "seconds": max_check_seconds}
    try:
        check_limits = CheckLimits(**{k: v for k, v in given.items() if v is not None})
    except ValueError as exc:
        raise fail(str(exc)) from None
    run(ServerSettings(host=host, port=port, db_url=db_url, ray_address=ray_address, fake_nodes=fake_cluster,
                       fake_gpu=fake_gpu, step_delay_s=step_delay, storage_root=storage, policy=policy,
                       metrics_auth=metrics_auth, data_roots=tuple(data_root or ()),
                       max_data_bytes=max_data_bytes, max_body_bytes=max_body_bytes, check_limits=check_limits))


def submit(spec: Annotated[Path, typer.Argument(help="job spec (YAML or JSON): model and training settings")],
           wait: Annotated[bool, typer.Option("--wait", help="follow live progress until the job ends")] = False,
           as_json: Json = False, url: Url = None) -> None:
    """Submit a job (no GPU count: Frenzy plans it) and print its plan.

    With --json: the created job (id, plans); with --wait too, the job's status once it has ended."""
    body = read_spec(spec)
    client = _client(url)
    created = _call(client.submit, body)
    if as_json:
        if not wait:
            emit(created)
            return
        job = _wait_quietly(client, created["id"])
        emit(job)
        raise typer.Exit(0 if job["state"] == "succeeded" else 1)
    best = created["plans"][0]
    console.print(f"[bold]{created['id']}[/] queued; best plan: {best['num_gpus']}x {best['gpu_type']} "
                  f"{best['describe']} (predicted {_gib(best['memory']['device_bytes'])} per GPU)")
    if wait:
        state = follow(client, created["id"])
        raise typer.Exit(0 if state == "succeeded" else 1)


def _wait_quietly(client, job_id: str, poll_s: float = 1.0) -> dict:
    """Poll until the job ends (no live view: stdout is for one JSON document); its final status."""
    while (job := _call(client.job, job_id))["state"] not in TERMINAL:
        time.sleep(poll_s)
    return job


def follow(client, job_id: str, poll_s: float = 1.0) -> str:
    """Live Rich view of one job until it ends; returns the final state."""
    from rich.live import Live

    after = 0
    with Live(console=console, refresh_per_second=4) as live:
        while True:
            job = _call(client.job, job_id)
            logs = _call(client.logs, job_id, after)
            after = logs["next_after"]
            for line in logs["lines"]:
                live.console.print(f"  {line['line']}")
            live.update(_job_panel(job))
            if job["state"] in TERMINAL:
                return job["state"]
            time.sleep(poll_s)


def _job_panel(job: dict) -> Table:
    table = Table.grid(padding=(0, 2))
    step = f"{job.get('step') or 0}/{job.get('total_steps') or '?'}"
    peaks = job["progress"].get("peak_bytes") or []
    predicted = job["chosen_plan"]["memory"]["device_bytes"] if job.get("chosen_plan") else 0
    table.add_row("[bold]" + job["id"], job["state"], f"attempt {job['attempts']}",
                  f"{job.get('num_gpus') or '-'}x {job.get('gpu_type') or '-'} {job.get('plan') or ''}")
    evaluated = f" (eval {job['eval_loss']})" if job.get("eval_loss") is not None else ""
    table.add_row("", f"step {step}", f"loss {job.get('loss') or '-'}{evaluated}",
                  f"memory predicted {_gib(predicted)} / observed {_gib(max(peaks) if peaks else 0)}"
                  + (" [red]AT RISK[/]" if job.get("at_risk") else ""))
    return table


def jobs(state: Annotated[Optional[StateChoice], typer.Option(help="only this state")] = None,
         as_json: Json = False, url: Url = None) -> None:
    """List jobs (--json: {"jobs": [...]}, each as GET /v1/jobs returns it)."""
    rows = _call(_client(url).jobs, state)
    if as_json:
        emit({"jobs": rows})
        return
    table = Table("id", "name", "state", "GPUs", "plan", "attempts", "step", "loss", "risk")
    for j in rows:
        table.add_row(j["id"], j["name"], j["state"], f"{j['num_gpus'] or '-'}x {j['gpu_type'] or '-'}",
                      j["plan"] or "-", str(j["attempts"]), f"{j['step'] or 0}/{j['total_steps'] or '?'}",
                      str(j["loss"] or "-"), "!" if j["at_risk"] else "")
    console.print(table)


def status(job_id: str, as_json: Json = False, url: Url = None) -> None:
    """A job's state, plan, predicted vs observed memory per attempt, progress."""
    job = _call(_client(url).job, job_id)
    if as_json:
        emit(job)
        return
    console.print(_job_panel(job))
    table = Table("attempt", "outcome", "plan", "placement", "predicted", "observed peak", "obs/pred")
    for a in job["attempts_detail"]:
        table.add_row(str(a["number"]), a["outcome"], f"{a['gpu_type']} {a['plan']}",
                      ", ".join(f"{n}:{g}" for n, g in a["allocation"]), _gib(a["predicted_device_bytes"]),
                      _gib(max(a["observed_peak_bytes"])) if a["observed_peak_bytes"] else "-",
                      str(a["observed_over_predicted"] or "-"))
    console.print(table)
    if job["failure_reason"]:
        console.print(f"[red]failed:[/] {job['failure_reason']}")


def logs(job_id: str, follow_: Annotated[bool, typer.Option("--follow", "-f", help="keep printing new lines")] = False,
         as_json: Annotated[bool, typer.Option("--json", help="JSON Lines: one object per log line (seq, "
                                                               "ts, line); an error is one object too")] = False,
         url: Url = None) -> None:
    """Print a job's log (Frenzy's decisions and the workers' per-step reports)."""
    client, after = _client(url), 0
    while True:
        out = _call(client.logs, job_id, after)
        for line in out["lines"]:
            print(json.dumps(line) if as_json else line["line"], flush=True)
        after = out["next_after"]
        if not follow_ or out["finished"]:
            return
        time.sleep(1)


def cancel(job_id: str, as_json: Json = False, url: Url = None) -> None:
    """Cancel a job (its workers stop within a control-loop step); --json: the job as it is now."""
    job = _call(_client(url).cancel, job_id)
    if as_json:
        emit(job)
        return
    console.print(f"{job['id']}: {job['state']} (cancellation requested)")


def cluster(as_json: Json = False, url: Url = None) -> None:
    """Nodes, GPU types, used and free GPUs (--json: GET /v1/cluster's answer)."""
    out = _call(_client(url).cluster)
    if as_json:
        emit(out)
        return
    table = Table("node", "GPU type", "GPU memory", "GPUs", "used", "free", "alive")
    for n in out["nodes"]:
        table.add_row(n["name"], n["gpu_type"], _gib(n["gpu_memory_bytes"]), str(n["total_gpus"]),
                      str(n["used_gpus"]), str(n["free_gpus"]), "yes" if n["alive"] else "no")
    console.print(table)
    from frenzy.cli.teams import team_table
    teams = team_table(out.get("teams") or {})
    if teams is not None:
        console.print(teams)


def ray_node_args(head: Annotated[str, typer.Option(help="the Ray head's HOST:PORT")] = "HEAD:6379",
                  name: Annotated[Optional[str], typer.Option(help="node name (default: hostname)")] = None,
                  inter_node_gbit_s: Annotated[Optional[float], typer.Option(
                      help="this node's network to other nodes in Gb/s (default: the catalog's 200)")] = None,
                  as_json: Json = False, gpu_catalog: GpuCatalog = None) -> None:
    """Print the `ray start` command that joins this GPU machine as a Frenzy node (from NVML)."""
    from frenzy.core.errors import FrenzyError
    from frenzy.executor.node_args import local_gpus, ray_start_command
    from frenzy.executor.resources import network_gbit_s

    use_gpu_catalog(gpu_catalog)  # a type the user added maps from its NVML name like a bundled one

    try:
        if inter_node_gbit_s is not None:  # checked before NVML, so a typo is reported on any machine
            network_gbit_s(inter_node_gbit_s, name or "this node")
        device, count, memory = local_gpus()
        command = ray_start_command(head, device, count, memory, name, inter_node_gbit_s)
    except (FrenzyError, ValueError) as exc:
        raise fail(str(exc)) from None
    if as_json:
        emit({"command": command, "device": device, "gpus": count, "gpu_memory_bytes": memory})
    else:
        print(command)


def register(app: typer.Typer) -> None:
    app.command()(serve)
    app.command()(submit)
    app.command()(jobs)
    app.command()(status)
    app.command()(logs)
    app.command()(cancel)
    app.command()(cluster)
    app.command("ray-node-args")(ray_node_args)

"""`frenzy simulate`: replay a trace on a cluster under several policies and compare them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from frenzy.cli.options import USER_ERRORS, GpuCatalog, fail, use_gpu_catalog

console = Console(width=None if Console().is_terminal else 120)


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f}"


def comparison_table(rows: list[dict], title: str) -> Table:
    """Headline metrics per policy (everything else is in --json)."""
    table = Table(title=title, caption="frenzy Δ JCT: frenzy's average JCT against the policy's, over the jobs both "
                                       "finished (a job given up after repeated OOMs has no JCT)")
    for col in ("policy", "avg JCT h", "p99 h", "wait h", "util", "useful", "OOM", "given up", "restarts", "GPU-h",
                "cost $", "ms/job p95", "ms/round p95", "frenzy Δ JCT"):
        table.add_column(col, justify="left" if col == "policy" else "right", no_wrap=col == "policy")
    for r in rows:
        cut = r.get("frenzy_avg_jct_reduction")
        table.add_row(
            r["policy"], _hours(r["avg_jct_s"]), _hours(r["p99_jct_s"]), _hours(r["avg_queueing_delay_s"]),
            f"{r['utilisation_allocated']:.0%}", f"{r['utilisation_useful']:.0%}", str(r["oom_restarts"]),
            str(r["abandoned"]), str(r["preemptions"]), f"{r['gpu_hours']:.0f}", f"{r['cost_usd']:.0f}",
            f"{r['decision_per_job_ms']['p95']:.3f}", f"{r['decision_per_round_ms']['p95']:.2f}",
            "—" if cut is None or r["policy"] == "frenzy" else f"{cut:+.0%}")
    return table


def simulate(
    trace: Annotated[Path, typer.Option(help="trace CSV (canonical, ElasticFlow or Philly)")],
    cluster: Annotated[str, typer.Option(help="built-in cluster name or a cluster YAML path")],
    policy: Annotated[str, typer.Option(help="comma list of policies")] = "frenzy,sia,gavel,opportunistic,fifo",
    trace_format: Annotated[str, typer.Option(help="auto | frenzy | elasticflow | philly")] = "auto",
    max_jobs: Annotated[Optional[int], typer.Option(help="use only the first N jobs")] = None,
    skip_jobs: Annotated[int, typer.Option(help="skip the first N jobs of the trace")] = 0,
    arrival_scale: Annotated[float, typer.Option(help="multiply submit times (<1 compresses the trace)")] = 1.0,
    seed: Annotated[int, typer.Option(help="seed of the workload mapping and the memory errors")] = 0,
    objective: Annotated[str, typer.Option(help="MARP plan ranking: time | cost")] = "time",
    as_json: Annotated[Optional[Path], typer.Option("--json", help="write every metric per policy here")] = None,
    plots: Annotated[Optional[Path], typer.Option(help="write JCT CDF, queue and utilisation PNGs here")] = None,
    teams: Annotated[Optional[str], typer.Option(
        help="team GPU quotas: a teams file (YAML/JSON: team -> quota, users), or 'users' for one team per trace "
             "user with an equal share of every GPU type (docs/QUOTAS.md)")] = None,
    gpu_catalog: GpuCatalog = None,
) -> None:
    """Replay a job trace on a simulated cluster and compare scheduling policies."""
    use_gpu_catalog(gpu_catalog)  # the simulated cluster and every policy look GPU types up in this process
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from frenzy.sched.registry import get_policy
    from frenzy.sim.cluster import load_cluster
    from frenzy.sim.engine import SimConfig
    from frenzy.sim.runner import comparison_rows, simulate as run
    from frenzy.sim.workload import load_trace, scale_arrivals

    try:
        names = [p.strip() for p in policy.split(",") if p.strip()]
        for name in names:
            get_policy(name)
        config = SimConfig(seed=seed, objective=objective)  # first: it checks the seed the trace mapping uses
        _check_outputs(as_json, plots)  # before the run, so a bad path does not waste it
        spec = load_cluster(cluster)
        jobs = load_trace(trace, trace_format, seed=seed, max_jobs=max_jobs, skip_jobs=skip_jobs)
        if arrival_scale != 1.0:
            jobs = scale_arrivals(jobs, arrival_scale)
        wrap, audits = _quotas(teams, jobs, spec)
    except (*USER_ERRORS, FileNotFoundError) as exc:
        raise fail(str(exc)) from None
    if not jobs:
        raise fail(f"trace {trace} has no jobs in the selected range")
    console.print(f"{len(jobs)} jobs on {spec.name} ({spec.total_gpus} GPUs: "
                  + ", ".join(f"{n} {t}" for t, n in spec.gpus_by_type().items()) + ")")
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[t]}"),
                  TimeElapsedColumn(), console=console, transient=False) as progress:
        tasks = {n: progress.add_task(n, total=len(jobs), t="") for n in names}

        def tick(name, done, total, now):
            progress.update(tasks[name], completed=done, total=total, t=f"sim {now / 3600:,.1f} h")

        results = run(spec, jobs, names, config, on_progress=tick, wrap=wrap)
    for audit in audits:
        console.print(f"{audit.name} under team quotas: {audit.violations} quota violation(s) in {audit.calls} calls")
    rows = comparison_rows(results)
    console.print(comparison_table(rows, f"{trace.name} on {spec.name}: {len(jobs)} jobs"))
    _write_outputs(results, rows, {"trace": str(trace), "cluster": spec.name, "jobs": len(jobs), "seed": seed},
                   as_json, plots)


def _quotas(teams: Optional[str], jobs, cluster):
    """(policy wrapper, the audits it made) for --teams; (None, []) without it."""
    if teams is None:
        return None, []
    from frenzy.sim.teams import derive_teams, load_teams, quota_policy

    spec = derive_teams(jobs, cluster) if teams == "users" else load_teams(teams)
    audits = []

    def wrap(policy):
        audits.append(quota_policy(policy, spec, jobs))
        return audits[-1]
    return wrap, audits


def _check_outputs(as_json: Optional[Path], plots: Optional[Path]) -> None:
    """Create the output folders now and refuse paths that cannot be written (ValueError)."""
    if as_json is not None and as_json.is_dir():
        raise ValueError(f"--json {as_json} is a directory; give a file path such as {as_json / 'metrics.json'}")
    for folder, option in ((None if as_json is None else as_json.parent, "--json"), (plots, "--plots")):
        if folder is None:
            continue
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValueError(f"{option}: cannot create the folder {folder} ({exc.strerror}); choose a writable path") from None
        if not os.access(folder, os.W_OK):
            raise ValueError(f"{option}: the folder {folder} is not writable; choose a writable path")


def _write_outputs(results, rows: list[dict], header: dict, as_json: Optional[Path], plots: Optional[Path]) -> None:
    if as_json is not None:
        as_json.write_text(json.dumps({**header, "policies": rows}, indent=2))
        console.print(f"metrics written to {as_json}")
    if plots is not None:
        from frenzy.sim.plots import write_plots

        for path in write_plots(results, plots):
            console.print(f"plot written to {path}")


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate)

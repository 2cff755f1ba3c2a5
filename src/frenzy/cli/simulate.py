"""`frenzy simulate`: replay a trace on a cluster under several policies and compare them."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from frenzy.cli.output import WideConsole, fail
from frenzy.cli.options import USER_ERRORS, GpuCatalog, use_gpu_catalog

COLUMNS = ("policy", "finished", "given\nup", "never\nrun", "avg JCT\nh", "p99 JCT\nh", "avg wait\nh",
           "GPUs\nheld", "OOM\nfails", "pre-\nempted", "GPU-h", "cost $", "ms/job\np95", "frenzy JCT\nvs it")
CAPTION = ("Averages and p99 are over each policy's finished jobs; finished + given up + never run = the trace's "
           "jobs. 'frenzy JCT vs it': frenzy's average JCT over the jobs both finished (how many in brackets) "
           "relative to this policy's: -40% means frenzy's is 40% lower. 'GPUs held': GPU-time allocated over "
           "the cluster's GPU-time to the last completion. 'OOM fails': attempts that ran out of memory; "
           "'preempted': times the policy stopped a running job (it resumes from its checkpoint). "
           "Useful utilisation, medians and per-round times are in --json.")


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f}"


def _versus(row: dict) -> str:
    cut = row.get("frenzy_avg_jct_reduction")
    if cut is None:
        return "—"
    return f"{-cut:+.0%} ({row['jobs_both_finished']})"  # frenzy's JCT relative to this policy's


def comparison_table(rows: list[dict], title: str) -> Table:
    """Headline metrics per policy (everything else is in --json)."""
    table = Table(title=title, caption=CAPTION, box=box.SIMPLE_HEAD, padding=(0, 1))
    for col in COLUMNS:
        table.add_column(col, justify="left" if col == "policy" else "right", no_wrap=True)
    for r in rows:
        finished = r["finished"]
        table.add_row(
            r["policy"], str(finished), str(r["given_up"]), str(r["never_run"]),
            _hours(r["avg_jct_s"]) if finished else "—", _hours(r["p99_jct_s"]) if finished else "—",
            _hours(r["avg_queueing_delay_s"]) if finished else "—", f"{r['utilisation_allocated']:.0%}",
            f"{r['oom_restarts']:,}", f"{r['preemptions']:,}", f"{r['gpu_hours']:,.0f}", f"{r['cost_usd']:,.2f}",
            f"{r['decision_per_job_ms']['p95']:.3f}", _versus(r))
    return table


def simulate(
    trace: Annotated[Path, typer.Option(help="trace CSV (canonical, ElasticFlow or Philly)")],
    cluster: Annotated[str, typer.Option(help="built-in cluster name or a cluster YAML path")],
    policy: Annotated[str, typer.Option(help="comma list of policies")] = "frenzy,sia,gavel,opportunistic,fifo",
    trace_format: Annotated[str, typer.Option(help="auto | frenzy | elasticflow | philly")] = "auto",
    max_jobs: Annotated[Optional[int], typer.Option(help="use only the first N jobs")] = None,
    skip_jobs: Annotated[int, typer.Option(help="skip the first N jobs of the trace")] = 0,
    arrival_scale: Annotated[Optional[float], typer.Option(
        help="multiply submit times (<1 compresses the trace); prints the offered load it gives")] = None,
    load: Annotated[Optional[float], typer.Option(
        help="pick the arrival scale that gives this offered load (requested GPU-hours per cluster GPU-hour, "
             "docs/SIMULATOR.md)")] = None,
    seed: Annotated[int, typer.Option(help="seed of the workload mapping and the memory errors")] = 0,
    objective: Annotated[str, typer.Option(help="MARP plan ranking: time | cost")] = "time",
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON document (summary and per-job records) "
                                                         "on stdout; errors too")] = False,
    json_out: Annotated[Optional[Path], typer.Option(help="also write that JSON document to this file")] = None,
    plots: Annotated[Optional[Path], typer.Option(help="write JCT CDF, queue and utilisation PNGs (and CSVs) "
                                                       "here")] = None,
    teams: Annotated[Optional[str], typer.Option(
        help="team GPU quotas: a teams file (YAML/JSON: team -> quota, users), or 'users' for one team per trace "
             "user with an equal share of every GPU type (docs/QUOTAS.md)")] = None,
    gpu_catalog: GpuCatalog = None,
) -> None:
    """Replay a job trace on a simulated cluster and compare scheduling policies."""
    console = WideConsole(stderr=as_json)  # with --json, stdout holds the document alone
    use_gpu_catalog(gpu_catalog)  # the simulated cluster and every policy look GPU types up in this process
    spec, jobs, names, config, load_line = _inputs(trace, cluster, policy, trace_format, max_jobs, skip_jobs,
                                                   arrival_scale, load, seed, objective, json_out, plots)
    header = {"trace": str(trace), "cluster": spec.name, "total_gpus": spec.total_gpus, "jobs": len(jobs),
              "seed": seed, **load_line}
    console.print(f"{len(jobs)} jobs on {spec.name} ({spec.total_gpus} GPUs: "
                  + ", ".join(f"{n} {t}" for t, n in spec.gpus_by_type().items()) + ")")
    offered = load_line["offered_load"]
    shown = "unbounded (all jobs arrive at once)" if offered is None else \
        f"{offered:.2f}" if offered < 1e4 else f"{offered:.3g}"  # a tiny --arrival-scale: no 300-digit number
    console.print(f"offered load {shown} "
                  f"(arrival scale {load_line['arrival_scale']:.4g}; requested GPU-hours per cluster GPU-hour "
                  "while jobs arrive, docs/SIMULATOR.md)")
    try:
        wrap, audits = _quotas(teams, jobs, spec)
    except (*USER_ERRORS, OSError) as exc:
        raise fail(str(exc), "fix the teams file (docs/QUOTAS.md) or pass --teams users") from None
    results, report = _run(spec, jobs, names, config, console, wrap)
    from frenzy.sim.runner import comparison_rows

    for audit in audits:
        console.print(f"{audit.name} under team quotas: {audit.violations} quota violation(s) in {audit.calls} calls")

    rows = comparison_rows(results)
    if not as_json:
        console.print(comparison_table(rows, f"{trace.name} on {spec.name}: {len(jobs)} jobs, seed {seed}"))
    document = {**header, "unrunnable": report,
                "quota_audits": [{"policy": a.name, "violations": a.violations, "calls": a.calls} for a in audits],
                "policies": [{**row, "job_records": r.jobs} for row, r in zip(rows, results)]}
    _write_outputs(results, document, header, as_json, json_out, plots, console)


def _inputs(trace, cluster, policy, trace_format, max_jobs, skip_jobs, arrival_scale, load, seed, objective,
            json_out, plots):
    """Every setting checked before the first simulation starts; a mistake is a user error."""
    from frenzy.sched.registry import get_policy
    from frenzy.sim.cluster import load_cluster
    from frenzy.sim.engine import SimConfig
    from frenzy.sim.workload import arrival_scale_for_load, load_trace, offered_load, scale_arrivals

    hint = "`frenzy simulate --help` lists the options"
    try:
        hint = "choose policies from: frenzy, sia, gavel, opportunistic, fifo"
        names = list(dict.fromkeys(p.strip() for p in policy.split(",") if p.strip()))  # each policy once
        if not names:
            raise ValueError("--policy names no policy")
        for name in names:
            get_policy(name)
        hint = "--seed must be >= 0 and --objective time or cost"
        config = SimConfig(seed=seed, objective=objective)  # first: it checks the seed the trace mapping uses
        hint = "give --json-out a file path and --plots a folder you can write"
        _check_outputs(json_out, plots)  # before the run, so a bad path does not waste it
        hint = "pass a built-in cluster name or a cluster YAML whose gpu_type values are catalog names"
        spec = load_cluster(cluster)
        hint = "check --trace, --trace-format and the job range (--max-jobs, --skip-jobs)"
        jobs = load_trace(trace, trace_format, seed=seed, max_jobs=max_jobs, skip_jobs=skip_jobs)
        if not jobs:
            raise ValueError(f"trace {trace} has no jobs in the selected range")
        hint = "give either --arrival-scale or --load, each > 0"
        if arrival_scale is not None and load is not None:
            raise ValueError("--arrival-scale and --load both set the arrival scale; give one of them")
        hint = "check that job's row of the trace, or give --arrival-scale or --load, each > 0"  # --load reads rows
        scale = arrival_scale_for_load(jobs, spec.total_gpus, load) if load is not None else \
            1.0 if arrival_scale is None else arrival_scale
        hint = "give either --arrival-scale or --load, each > 0"
        jobs = scale_arrivals(jobs, scale) if scale != 1.0 else jobs
        hint = "check that job's row of the trace"
        offered = offered_load(jobs, spec.total_gpus) if len(jobs) > 1 and \
            jobs[-1].submit_time_s > jobs[0].submit_time_s else None  # one instant: no arrival window
    except (*USER_ERRORS, OSError) as exc:
        raise fail(str(exc), hint) from None
    return spec, jobs, names, config, {"offered_load": offered, "arrival_scale": scale}


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


def _run(spec, jobs, names, config, console, wrap=None):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from frenzy.sim.engine import BeyondClockError
    from frenzy.sim.runner import prepare, run_all, unrunnable_report

    sims = prepare(spec, jobs, names, config, wrap)
    report = unrunnable_report(sims)
    for line in _report_lines(report):
        console.print(line)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[t]}"),
                  TimeElapsedColumn(), console=console, transient=False) as progress:
        tasks = {n: progress.add_task(n, total=len(jobs), t="") for n in names}

        def tick(name, done, total, now):
            progress.update(tasks[name], completed=done, total=total, t=f"sim {now / 3600:,.1f} h")

        try:
            results = run_all(sims, on_progress=tick)
        except BeyondClockError as exc:
            raise fail(str(exc), "fix or drop that job's row of the trace") from None
    return results, report


def _report_lines(report: list[dict]) -> list[str]:
    """The load-time report: how many jobs some policy can never run, why, and what each policy does."""
    if not report:
        return ["every policy can run every job of the trace on this cluster"]
    lines = ["jobs some policy can never run here (rejected by that policy, never queued):"]
    for g in report:
        verdicts = "; ".join(f"{p} rejects {n}" if n else f"{p} runs them" for p, n in g["rejected_by"].items())
        lines.append(f"  {g['jobs']} {g['why']} (e.g. one {g['example']}): {verdicts}")
    return lines


def _check_outputs(json_out: Optional[Path], plots: Optional[Path]) -> None:
    """Create the output folders now and refuse paths that cannot be written (ValueError)."""
    if json_out is not None and json_out.is_dir():
        raise ValueError(f"--json-out {json_out} is a directory; give a file path such as "
                         f"{json_out / 'metrics.json'}")
    for folder, option in ((None if json_out is None else json_out.parent, "--json-out"), (plots, "--plots")):
        if folder is None:
            continue
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValueError(f"{option}: cannot create the folder {folder} ({exc.strerror}); choose a writable path") from None
        if not os.access(folder, os.W_OK):
            raise ValueError(f"{option}: the folder {folder} is not writable; choose a writable path")


def _write_outputs(results, document: dict, header: dict, as_json: bool, json_out: Optional[Path],
                   plots: Optional[Path], console: Console) -> None:
    text = json.dumps(document, indent=2)
    if json_out is not None:
        json_out.write_text(text)
        console.print(f"metrics and per-job records written to {json_out}")
    if plots is not None:
        from frenzy.sim.plots import write_plots

        for path in write_plots(results, plots, header):
            console.print(f"written: {path}")
    if as_json:
        sys.stdout.write(text + "\n")


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate)

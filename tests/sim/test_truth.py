"""The simulator reports what happened to every job: unrunnable jobs, GPU names, per-job records,
plots that end where the runs end, and the offered load."""

import csv
import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from frenzy.cli.main import app
from frenzy.core.errors import FrenzyError
from frenzy.sim.cluster import load_cluster
from frenzy.sim.engine import SimConfig
from frenzy.sim.runner import prepare, run_all, unrunnable_report
from frenzy.sim.trace import TraceJob, read_frenzy_csv, write_frenzy_csv
from tests.sim.conftest import small_jobs


def _with_unrunnable() -> list[TraceJob]:
    """The small mix (every job fits testbed: 8 GPUs of each of three types), then two jobs no policy
    that keeps the user's request can run there: bf16 on T4 (no bf16), and 32 GPUs (8 of any type)."""
    jobs = small_jobs(12)
    bf16_on_t4 = replace(jobs[0], job_id="bf16-on-t4", submit_time_s=30.0, precision="bf16-mixed",
                         requested_gpu_type="T4-16G", requested_gpus=2, global_batch=16)
    too_big = replace(jobs[2], job_id="wants-32", submit_time_s=40.0, requested_gpus=32, global_batch=64,
                      requested_gpu_type=None)
    return sorted([*jobs, bf16_on_t4, too_big], key=lambda j: j.submit_time_s)


@pytest.fixture(scope="module")
def unrunnable_runs():
    sims = prepare(load_cluster("testbed"), _with_unrunnable(), ["frenzy", "gavel", "fifo"], SimConfig(seed=0))
    report = unrunnable_report(sims)
    return report, {r.policy: r for r in run_all(sims)}


def test_jobs_a_policy_cannot_run_are_reported_at_load_and_rejected_not_queued(unrunnable_runs):
    report, results = unrunnable_runs
    by_kind = {g["kind"]: g for g in report}
    assert set(by_kind) == {"no_precision", "too_many"}
    # fifo keeps count and type: it rejects both; gavel keeps the count only; frenzy plans its own GPUs.
    assert by_kind["no_precision"]["rejected_by"] == {"frenzy": 0, "gavel": 0, "fifo": 1}
    assert by_kind["too_many"]["rejected_by"] == {"frenzy": 0, "gavel": 1, "fifo": 1}
    assert "T4-16G, which has no bf16" in by_kind["no_precision"]["example"]

    fifo = results["fifo"].summary()
    records = {j["job_id"]: j for j in results["fifo"].jobs}
    assert records["bf16-on-t4"]["outcome"] == "rejected" and "no bf16" in records["bf16-on-t4"]["reason"]
    assert records["wants-32"]["outcome"] == "rejected" and "requests 32 GPUs" in records["wants-32"]["reason"]
    # Nothing waits for ever: strict FIFO behind the unrunnable jobs still finishes everything else.
    assert (fifo["finished"], fifo["rejected"], fifo["waiting"], fifo["jobs"]) == (12, 2, 0, 14)
    assert fifo["never_run"] == 2
    assert results["frenzy"].summary()["finished"] == 14
    gavel = results["gavel"].summary()
    assert gavel["finished"] + gavel["given_up"] == 13 and gavel["rejected"] == 1 and gavel["waiting"] == 0


def test_the_cli_prints_the_load_report(tmp_path):
    path = tmp_path / "t.csv"
    write_frenzy_csv(_with_unrunnable(), path)
    result = CliRunner().invoke(app, ["simulate", "--trace", str(path), "--cluster", "testbed", "--policy",
                                      "frenzy,fifo"])
    assert result.exit_code == 0, result.output
    assert "1 request a GPU type without their precision (bf16)" in result.output
    assert "frenzy runs them; fifo rejects 1" in result.output


def test_unknown_or_ambiguous_gpu_names_are_errors_with_suggestions(tmp_path):
    cluster = tmp_path / "c.yaml"
    cluster.write_text("name: c\nnodes:\n  - {gpu_type: t4-16g, gpus_per_node: 4, count: 1}\n"
                       "  - {gpu_type: a100, gpus_per_node: 8, count: 1}\n")
    with pytest.raises(FrenzyError) as err:
        load_cluster(str(cluster))
    message = str(err.value)
    assert "node group 2" in message and "'a100'" in message
    assert "Did you mean: A100-SXM-40G, A100-SXM-80G, A100-PCIe-40G, A100-PCIe-80G" in message

    trace = tmp_path / "t.csv"
    write_frenzy_csv(small_jobs(2), trace)
    rows = trace.read_text().splitlines()
    rows[1] = rows[1].replace(",T4-16G,", ",v100,")
    trace.write_text("\n".join(rows) + "\n")
    with pytest.raises(FrenzyError, match=r"job j000's requested_gpu_type.*Did you mean: V100-SXM-16G"):
        read_frenzy_csv(trace)

    result = CliRunner().invoke(app, ["simulate", "--trace", str(trace), "--cluster", "testbed", "--json"])
    assert result.exit_code == 2
    error = json.loads(result.stdout)
    assert "V100-SXM-16G" in error["error"] and error["hint"]


def test_any_gpu_type_is_explicit_in_the_trace(tmp_path):
    path = tmp_path / "t.csv"
    write_frenzy_csv(small_jobs(2), path)
    rows = list(csv.DictReader(path.open()))
    assert [r["requested_gpu_type"] for r in rows] == ["T4-16G", "any"]
    assert [j.requested_gpu_type for j in read_frenzy_csv(path)] == ["T4-16G", None]


def test_json_on_stdout_carries_consistent_per_job_records(trace_csv):
    result = CliRunner().invoke(app, ["simulate", "--trace", str(trace_csv), "--cluster", "sia-64", "--policy",
                                      "frenzy,gavel,fifo", "--max-jobs", "16", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)  # stdout is the JSON document alone
    assert document["jobs"] == 16 and len(document["policies"]) == 3
    for policy in document["policies"]:
        records = policy["job_records"]
        assert len(records) == 16 and len({r["job_id"] for r in records}) == 16
        outcomes = [r["outcome"] for r in records]
        assert policy["finished"] == outcomes.count("finished")
        assert policy["finished"] + policy["given_up"] + policy["never_run"] == 16
        for r in records:
            if r["start_s"] is None:
                assert r["attempts"] == [] and r["outcome"] != "finished"
                continue
            assert r["end_s"] >= r["start_s"] >= r["submit_s"]
            assert r["start_s"] == r["attempts"][0]["start_s"]
            ends = [a["end_s"] for a in r["attempts"]]
            assert all(a["start_s"] <= a["end_s"] for a in r["attempts"]) and ends == sorted(ends)
            last = r["attempts"][-1]
            assert (r["gpu_type"], r["gpus"], r["plan"]) == (last["gpu_type"], last["gpus"], last["plan"])
            if r["outcome"] == "finished":
                assert last["ended"] == "finished" and r["end_s"] == last["end_s"]
                assert r["jct_s"] == pytest.approx(r["end_s"] - r["submit_s"])
            assert sum(a["ended"] == "out of memory" for a in r["attempts"]) == r["ooms"]
            assert sum(a["ended"] == "preempted" for a in r["attempts"]) == r["preemptions"]


def test_plots_end_at_the_last_completion_and_come_with_csvs(trace_csv, tmp_path):
    out, plots = tmp_path / "m.json", tmp_path / "plots"
    result = CliRunner().invoke(app, ["simulate", "--trace", str(trace_csv), "--cluster", "testbed", "--policy",
                                      "frenzy,sia,fifo", "--max-jobs", "12", "--json-out", str(out),
                                      "--plots", str(plots)])
    assert result.exit_code == 0, result.output
    ends = {p["policy"]: max(r["end_s"] for r in p["job_records"] if r["end_s"] is not None) / 3600
            for p in json.loads(out.read_text())["policies"]}
    for name in ("queue_length", "utilisation"):
        rows = list(csv.DictReader((plots / f"{name}.csv").open()))
        for policy, end_h in ends.items():
            times = [float(r["t_h"]) for r in rows if r["policy"] == policy]
            assert max(times) == pytest.approx(end_h, rel=1e-5)  # up to its last completion, not past it
    types = {r["gpu_type"] for r in csv.DictReader((plots / "utilisation.csv").open())}
    assert types == {"all types", "A100-SXM-80G", "A10-24G", "T4-16G"}
    assert all(0 <= float(r["fraction_of_type"]) <= 1 for r in csv.DictReader((plots / "utilisation.csv").open()))
    assert (plots / "jct_cdf.csv").exists() and (plots / "utilisation.png").read_bytes()[:4] == b"\x89PNG"


def test_reference_duration_is_the_traces_recorded_duration(shared_traces):
    from frenzy.sim.trace import read_philly
    from frenzy.sim.workload import load_trace, reference_duration_s

    path = shared_traces / "philly" / "philly.csv"
    raw = {r.job_id: r.duration_s for r in sorted(read_philly(path), key=lambda r: r.submit_time_s)[:60]}
    for job in load_trace(path, max_jobs=60):
        if raw[job.job_id] >= 600:  # steps are rounded: a few-minute job is off by up to half a step
            assert reference_duration_s(job) == pytest.approx(raw[job.job_id], rel=0.01)


def test_load_picks_the_arrival_scale_and_both_print_the_offered_load(trace_csv):
    from frenzy.sim.workload import (arrival_scale_for_load, load_trace, offered_load, reference_duration_s,
                                     scale_arrivals)

    jobs = load_trace(trace_csv)
    # By hand: requested GPU-seconds over the cluster's GPU-seconds in the arrival window.
    window = jobs[-1].submit_time_s - jobs[0].submit_time_s
    by_hand = sum((j.requested_gpus or 1) * reference_duration_s(j) for j in jobs) / (24 * window)
    assert offered_load(jobs, 24) == pytest.approx(by_hand)
    scale = arrival_scale_for_load(jobs, 24, 0.7)
    assert offered_load(scale_arrivals(jobs, scale), 24) == pytest.approx(0.7)

    result = CliRunner().invoke(app, ["simulate", "--trace", str(trace_csv), "--cluster", "testbed", "--policy",
                                      "fifo", "--load", "0.7", "--json"])
    document = json.loads(result.stdout)
    assert document["offered_load"] == pytest.approx(0.7) and document["arrival_scale"] == pytest.approx(scale)
    result = CliRunner().invoke(app, ["simulate", "--trace", str(trace_csv), "--cluster", "testbed", "--policy",
                                      "fifo", "--arrival-scale", "0.5"])
    assert f"offered load {by_hand / 0.5:.2f} (arrival scale 0.5" in result.output
    result = CliRunner().invoke(app, ["simulate", "--trace", str(trace_csv), "--cluster", "testbed",
                                      "--arrival-scale", "0.5", "--load", "1", "--json"])
    assert result.exit_code == 2 and "give one of them" in json.loads(result.stdout)["error"]
    result = CliRunner().invoke(app, ["simulate", "--trace", str(trace_csv), "--cluster", "testbed",
                                      "--load", "many", "--json"])
    assert result.exit_code == 2 and "'--load'" in json.loads(result.stdout)["error"]
    for load in ("0", "inf", "nan"):  # no arrival scale gives these
        result = CliRunner().invoke(app, ["simulate", "--trace", str(trace_csv), "--cluster", "testbed",
                                          "--load", load, "--json"])
        assert result.exit_code == 2 and "--load must be a number > 0" in json.loads(result.stdout)["error"], load


def test_a_requested_type_the_cluster_lacks_is_rejected_not_read_as_any_type():
    from frenzy.sched import get_policy
    from frenzy.sim.engine import Simulator

    jobs = [replace(small_jobs(1)[0], requested_gpu_type="H100-SXM-80G")]
    fifo = Simulator(load_cluster("testbed"), get_policy("fifo"), jobs, SimConfig(seed=0))
    assert fifo.rejections()[0].text == "requests H100-SXM-80G, which this cluster does not have"
    assert fifo.run().summary()["rejected"] == 1
    frenzy = Simulator(load_cluster("testbed"), get_policy("frenzy"), jobs, SimConfig(seed=0))
    assert frenzy.rejections() == {} and frenzy.run().summary()["finished"] == 1

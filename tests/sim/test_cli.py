"""`frenzy simulate` end to end on a small trace."""

import json

import pytest
from typer.testing import CliRunner

from frenzy.cli.main import app


def test_simulate_writes_json_and_plots(trace_csv, tmp_path):
    out, plots = tmp_path / "m.json", tmp_path / "plots"
    result = CliRunner().invoke(app, ["simulate", "--trace", str(trace_csv), "--cluster", "testbed",
                                      "--policy", "frenzy,opportunistic,fifo", "--max-jobs", "12",
                                      "--json-out", str(out), "--plots", str(plots)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert [p["policy"] for p in data["policies"]] == ["frenzy", "opportunistic", "fifo"]
    assert all("p99_jct_s" in p and "decision_per_job_ms" in p for p in data["policies"])
    ours, *others = data["policies"]
    for p in others:  # frenzy's cut against each is taken over the jobs both finished
        assert 0 < p["jobs_both_finished"] <= min(p["finished"], ours["finished"])
        assert -1 < p["frenzy_avg_jct_reduction"] < 1
    assert "given up" in result.output
    for name in ("jct_cdf.png", "queue_length.png", "utilisation.png"):
        assert (plots / name).read_bytes()[:4] == b"\x89PNG"


def test_simulate_unknown_policy_is_a_user_error(trace_csv):
    result = CliRunner().invoke(app, ["simulate", "--trace", str(trace_csv), "--cluster", "testbed",
                                      "--policy", "frenzzy"])
    assert result.exit_code == 2 and "Did you mean" in result.output


def test_simulate_bad_settings_are_user_errors_before_any_run(trace_csv):
    for args, says in ((["--objective", "speed"], "unknown objective 'speed'; choose one of: time, cost"),
                       (["--seed", "-1"], "seed must be >= 0"),
                       (["--max-jobs", "0"], "max jobs must be >= 1"),
                       (["--trace-format", "philly"], "not in the philly format"),
                       (["--json-out", str(trace_csv.parent)], "is a directory; give a file path"),
                       (["--plots", str(trace_csv)], "--plots: cannot create the folder")):
        result = CliRunner().invoke(app, ["simulate", "--trace", str(trace_csv), "--cluster", "testbed",
                                          "--policy", "frenzy", *args])
        assert result.exit_code == 2 and says in result.output, (args, result.output)


def test_simulate_runs_on_a_gpu_type_and_price_from_a_user_catalog(trace_csv, tmp_path):
    from frenzy.core import catalog

    gpus = tmp_path / "gpus.yaml"
    gpus.write_text("gpus:\n  - name: Acme-S1-80G\n    memory_bytes: 85899345920\n"
                    "    peak_flops: {bf16: 500.0e+12, fp16: 500.0e+12, tf32: 250.0e+12, fp32: 60.0e+12}\n"
                    "    hbm_bandwidth_bytes_s: 3.0e+12\n    intra_node_link: nvlink\n"
                    "    intra_node_bandwidth_bytes_s: 300.0e+9\n    gpus_per_node: 8\n    supports_bf16: true\n"
                    "    price_per_gpu_hour_usd: 1.25\n")
    cluster = tmp_path / "acme.yaml"
    cluster.write_text("name: acme\nnodes:\n  - gpu_type: acme-s1-80g\n    gpus_per_node: 8\n    count: 2\n")
    out = tmp_path / "m.json"
    try:
        result = CliRunner().invoke(app, ["simulate", "--trace", str(trace_csv), "--cluster", str(cluster),
                                          "--policy", "frenzy", "--max-jobs", "6", "--json-out", str(out),
                                          "--gpu-catalog", str(gpus)])
    finally:
        catalog.use_gpu_catalog(None)
    assert result.exit_code == 0, result.output
    assert "16 Acme-S1-80G" in result.output
    (run,) = json.loads(out.read_text())["policies"]
    assert run["finished"] == 6
    assert run["cost_usd"] == pytest.approx(run["gpu_hours"] * 1.25)  # the user's price, the only type's

"""`frenzy simulate` end to end on a small trace."""

import json

from typer.testing import CliRunner

from frenzy.cli.main import app


def test_simulate_writes_json_and_plots(trace_csv, tmp_path):
    out, plots = tmp_path / "m.json", tmp_path / "plots"
    result = CliRunner().invoke(app, ["simulate", "--trace", str(trace_csv), "--cluster", "testbed",
                                      "--policy", "frenzy,opportunistic,fifo", "--max-jobs", "12",
                                      "--json", str(out), "--plots", str(plots)])
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
                       (["--json", str(trace_csv.parent)], "is a directory; give a file path"),
                       (["--plots", str(trace_csv)], "--plots: cannot create the folder")):
        result = CliRunner().invoke(app, ["simulate", "--trace", str(trace_csv), "--cluster", "testbed",
                                          "--policy", "frenzy", *args])
        assert result.exit_code == 2 and says in result.output, (args, result.output)

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


def _canonical_trace(path, *rows):
    header = "job_id,submit_time_s,model,global_batch,seq_len,steps,precision,method,requested_gpus,requested_gpu_type,user"
    path.write_text("\n".join([header, "a,0,gpt2,8,512,100,fp16-mixed,full,1,,u", *rows]) + "\n")
    return path


@pytest.mark.parametrize("row, says", [
    ("b,nan,gpt2,8,512,100,fp16-mixed,full,1,,u", "job b: submit_time_s must be a number of seconds"),
    ("b,inf,gpt2,8,512,100,fp16-mixed,full,1,,u", "job b: submit_time_s must be a number of seconds"),
    ("b,1e300,gpt2,8,512,100,fp16-mixed,full,1,,u", "got 1e+300"),
    ("b,10,gpt2,8,512,100,fp16-mixed,full,inf,,u", "expected a whole number, got 'inf'"),
    ("b,10,gpt2,8,100000,100,fp16-mixed,full,1,,u", "job b: sequence length 100000 exceeds"),
])
def test_a_trace_row_out_of_range_is_a_user_error_naming_the_job(tmp_path, row, says):
    # NaN and infinite submit times stalled the event loop (a NaN never compares <= now) instead of failing
    trace = _canonical_trace(tmp_path / "t.csv", row)
    result = CliRunner().invoke(app, ["simulate", "--trace", str(trace), "--cluster", "testbed", "--policy", "frenzy"])
    assert result.exit_code == 2 and says in result.output, result.output


def test_public_trace_rows_with_non_finite_times_are_user_errors(tmp_path):
    philly = tmp_path / "p.csv"
    philly.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66,1,66,x\n"
                      "2017-10-09 07:02:55,inf,1,66,x\n")
    elasticflow = tmp_path / "e.csv"
    elasticflow.write_text("job_id,submission_time,duration,num_gpu\nx,0,600,1\ny,5,nan,1\n")
    for trace, says in ((philly, "job philly-1: duration must be"), (elasticflow, "job y: duration must be")):
        result = CliRunner().invoke(app, ["simulate", "--trace", str(trace), "--cluster", "testbed", "--policy", "fifo"])
        assert result.exit_code == 2 and says in result.output, result.output


def test_a_job_that_would_run_past_the_clock_stops_the_run_with_a_user_error(tmp_path):
    from frenzy.sim.trace import MAX_TIME_S

    trace = _canonical_trace(tmp_path / "t.csv", "b,10,gpt2,8,512,1000000000000000000,fp16-mixed,full,1,,u")
    result = CliRunner().invoke(app, ["simulate", "--trace", str(trace), "--cluster", "testbed", "--policy", "fifo"])
    assert result.exit_code == 2, result.output
    assert "job b (1e+18 steps left" in result.output and f"past the simulator's {MAX_TIME_S:.4g} s" in result.output


@pytest.mark.parametrize("scale, says", [("0", "arrival scale must be a number > 0, got 0.0"),
                                         ("nan", "arrival scale must be a number > 0, got nan"),
                                         ("inf", "arrival scale must be a number > 0, got inf"),
                                         ("1e300", "puts the last arrival at")])
def test_an_arrival_scale_outside_the_clock_is_a_user_error(trace_csv, scale, says):
    # 0 used to fall back to 1 silently; infinity made every submit time NaN and Gavel's rounds grew without end
    result = CliRunner().invoke(app, ["simulate", "--trace", str(trace_csv), "--cluster", "testbed",
                                      "--policy", "fifo", "--arrival-scale", scale])
    assert result.exit_code == 2 and says in result.output, result.output


def test_a_folder_given_as_a_file_is_a_user_error(trace_csv):
    for args in (["--trace", str(trace_csv.parent), "--cluster", "testbed"],
                 ["--trace", str(trace_csv), "--cluster", str(trace_csv.parent)]):
        result = CliRunner().invoke(app, ["simulate", *args, "--policy", "fifo"])
        assert result.exit_code == 2 and "Is a directory" in result.output and "internal error" not in result.output


def test_gavels_solver_prints_nothing_on_stdout():
    # HiGHS prints its banner from C++ when highspy builds a solver, before output can be turned off;
    # on stdout it broke `frenzy simulate --json`'s document
    import subprocess
    import sys

    code = "from frenzy.sched.maxmin import MaxMinLp; MaxMinLp([8.0, 8.0])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout == ""


def test_a_trace_file_that_is_no_clean_csv_is_a_user_error_naming_file_and_line(tmp_path):
    # each of these was an internal error (csv.Error, TypeError, the simulator's duplicate check)
    header = ("job_id,submit_time_s,model,global_batch,seq_len,steps,precision,method,requested_gpus,"
              "requested_gpu_type,user")
    cases = {"long.csv": (header + "\n" + "x" * 200_000 + ",0,gpt2,8,512,100,,,,,\n", "is not a CSV text file"),
             "short.csv": (header + "\na,0,gpt2\n", "short.csv, line 2: no cell for global_batch, seq_len, steps"),
             "twice.csv": (header + "\na,0,gpt2,8,512,100,,,,,\na,5,gpt2,8,512,100,,,,,\n",
                           "job id 'a' is repeated")}
    for name, (text, says) in cases.items():
        (tmp_path / name).write_text(text)
        result = CliRunner().invoke(app, ["simulate", "--trace", str(tmp_path / name), "--cluster", "testbed",
                                          "--policy", "fifo"])
        assert result.exit_code == 2 and says in result.output and "internal error" not in result.output, \
            (name, result.output)
    (tmp_path / "bytes.csv").write_bytes(b"\xff\xfe\x00garbage\n")
    result = CliRunner().invoke(app, ["simulate", "--trace", str(tmp_path / "bytes.csv"), "--cluster", "testbed"])
    assert result.exit_code == 2 and "bytes.csv is not a CSV text file" in result.output


def test_a_trace_saved_with_a_byte_order_mark_reads_as_without(trace_csv, tmp_path):
    from frenzy.sim.trace import read_frenzy_csv

    marked = tmp_path / "marked.csv"
    marked.write_text(trace_csv.read_text(), encoding="utf-8-sig")  # as spreadsheets save CSV
    assert read_frenzy_csv(marked) == read_frenzy_csv(trace_csv)


def test_a_policy_named_twice_runs_once(trace_csv):
    result = CliRunner().invoke(app, ["simulate", "--trace", str(trace_csv), "--cluster", "testbed", "--max-jobs", "4",
                                      "--policy", "fifo, fifo,frenzy,fifo", "--json"])
    assert result.exit_code == 0, result.output
    assert [p["policy"] for p in json.loads(result.stdout)["policies"]] == ["fifo", "frenzy"]

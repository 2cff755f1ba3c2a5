"""The `frenzy memory` / `frenzy plan` command line: stable JSON, readable errors."""

import json

from typer.testing import CliRunner

from frenzy.cli.main import app
from frenzy.core import catalog

runner = CliRunner()


def run(*args):
    return runner.invoke(app, list(args))


def test_memory_json_has_the_stable_keys():
    result = run("memory", "llama-3.2-1b", "--micro-batch", "2", "--seq", "2048", "--gpu", "A10-24G", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    for key in ("model", "params", "allocated_bytes", "reserved_bytes", "device_bytes", "breakdown", "peak_phase", "fits"):
        assert key in out
    assert out["allocated_bytes"] <= out["reserved_bytes"] <= out["device_bytes"]
    assert sum(out["breakdown"].values()) == out["device_bytes"]
    assert out["allocated_bytes"] < out["required_bytes"] <= out["device_bytes"]
    # the planner's fit rule: the required bytes within the GPU's memory less the 5% safety margin
    assert out["fits"] == (out["required_bytes"] <= 0.95 * catalog.gpu_type("A10-24G").memory_bytes)


def test_memory_table_labels_units():
    result = run("memory", "gpt2", "--seq", "1024")
    assert result.exit_code == 0, result.output
    assert "GiB" in result.stdout and "activations" in result.stdout


def test_unknown_model_is_a_clear_error():
    result = run("memory", "llama-9-7b")
    assert result.exit_code == 2
    assert "Did you mean" in result.output


def test_bad_flag_value_lists_the_choices():
    result = run("memory", "gpt2", "--seq", "512", "--precision", "fp8")
    assert result.exit_code == 2
    assert "bf16-mixed" in result.output


def test_config_json_path_is_accepted(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(catalog.model_config("Qwen/Qwen2.5-0.5B")))
    result = run("memory", str(path), "--seq", "1024", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["params"] > 0


def test_plan_json_lists_fitting_plans_in_rank_order():
    result = run("plan", "llama-3.1-8b", "--global-batch", "32", "--seq", "2048", "--gpus",
                 "A100-SXM-80G,L40S-48G", "--json")
    assert result.exit_code == 0, result.output
    plans = json.loads(result.stdout)["plans"]
    assert plans and all(p["gpu_type"] in ("A100-SXM-80G", "L40S-48G") for p in plans)
    times = [p["predicted_time_s"] for p in plans]
    assert times == sorted(times)  # the default objective (time) prefers the fastest
    for gpu in ("A100-SXM-80G", "L40S-48G"):  # each type also offers its leanest plan: the fewest GPUs
        mine = [p for p in plans if p["gpu_type"] == gpu]
        fewest = min(p["num_gpus"] for p in mine)
        assert all(p["predicted_time_s"] < min(q["predicted_time_s"] for q in mine if q["num_gpus"] == fewest)
                   for p in mine if p["num_gpus"] > fewest)


def test_infeasible_plan_names_the_requirement_and_remedies():
    result = run("plan", "llama-2-70b", "--global-batch", "8", "--seq", "4096", "--gpus", "RTX-2080Ti-11G",
                 "--precision", "fp16-mixed", "--max-gpus", "4")
    assert result.exit_code == 2
    assert "needs" in result.output and "GiB" in result.output and "LoRA" in result.output


def test_a_plan_the_model_cannot_take_and_a_non_positive_top_are_clear_errors():
    result = run("memory", "llama-3.2-1b", "--tp", "3")  # 32 heads, 8 KV heads
    assert result.exit_code == 2 and "tp 3 does not split 32 heads" in result.output and "use one of 1, 2, 4, 8" in result.output
    result = run("plan", "gpt2", "--seq", "512", "--top", "0")
    assert result.exit_code == 2 and "--top must be >= 1" in result.output

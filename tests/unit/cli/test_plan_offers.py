"""What `frenzy plan` offers is what the worker runs and what `frenzy memory --gpu` calls a fit.

Every plan the command prints is checked against the worker's own validation
(core.worker_support.unsupported_reason and memory.plans.check_plan), against the GPU catalog's
dtype support and against the fit rule computed here by hand (required bytes within 95% of the GPU's
memory)."""

import json

import pytest
from typer.testing import CliRunner

from frenzy.cli.main import app
from frenzy.core import catalog
from frenzy.core.hf_config import load_model
from frenzy.core.job import JobSpec
from frenzy.core.plan import MixedPrecisionMode, ParallelPlan
from frenzy.core.training import Method, Precision, Recompute, TrainingConfig, ZeroStage
from frenzy.core.worker_support import unsupported_reason
from frenzy.memory.plans import check_plan

runner = CliRunner()
GPUS = "H100-SXM-80G,A100-SXM-40G,L40S-48G,A10G-24G,RTX-4090-24G,T4-16G,V100-SXM-32G"
NO_BF16 = {g.name for g in catalog.gpu_types().values() if not g.supports_bf16}


def run(*args):
    return runner.invoke(app, list(args))


def plan_json(model, *flags):
    result = run("plan", model, "--gpus", GPUS, "--max-gpus", "16", "--json", *flags)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["plans"]


def as_plan(row: dict) -> ParallelPlan:
    return ParallelPlan(dp=row["dp"], tp=row["tp"], pp=row["pp"], zero=ZeroStage(row["zero"]),
                        micro_batch=row["micro_batch"], grad_accum=row["grad_accum"],
                        recompute=Recompute.parse(row["recompute"]), sequence_parallel=row["sequence_parallel"],
                        mixed_precision=MixedPrecisionMode.parse(row["mixed_precision"]))


MATRIX = [  # (model, method, precision, global batch, seq): TP families and not, LoRA, QLoRA, MoE, fp16
    ("meta-llama/Llama-3.1-8B", "full", "bf16-mixed", 32, 2048),
    ("Qwen/Qwen2.5-14B", "lora", "bf16-mixed", 32, 2048),
    ("openai-community/gpt2-xl", "full", "fp16-mixed", 32, 1024),
    ("mistralai/Mixtral-8x7B-v0.1", "lora", "bf16-mixed", 16, 2048),
    ("meta-llama/Llama-3.1-70B", "qlora", "bf16-mixed", 16, 2048),
    ("google/gemma-3-27b-pt", "full", "bf16-mixed", 16, 2048),
    ("meta-llama/Llama-3.2-3B", "full", "fp16-mixed", 32, 4096),
    ("Qwen/Qwen3-30B-A3B", "lora", "bf16-mixed", 64, 2048),
    ("Qwen/Qwen1.5-MoE-A2.7B", "full", "bf16-mixed", 32, 2048),
]


@pytest.mark.parametrize("model, method, precision, batch, seq", MATRIX)
def test_every_plan_shown_passes_the_workers_validation_and_fits_by_hand(model, method, precision, batch, seq):
    rows = plan_json(model, "--method", method, "--precision", precision, "--global-batch", str(batch),
                     "--seq", str(seq), "--faster", "3")
    assert rows, "the matrix is chosen so that something fits"
    job = JobSpec(model=load_model(model), seq_len=seq, global_batch=batch,
                  training=TrainingConfig(method=Method(method), precision=Precision(precision)))
    for row in rows:
        plan, gpu = as_plan(row), catalog.gpu_type(row["gpu_type"])
        assert row["runnable"] and unsupported_reason(job, plan) is None, row
        check_plan(job, plan)
        assert plan.global_batch == batch and plan.tp <= gpu.gpus_per_node
        assert row["memory"]["required_bytes"] <= 0.95 * gpu.memory_bytes
        assert row["headroom_bytes"] == int(0.95 * gpu.memory_bytes) - row["memory"]["required_bytes"]
        assert gpu.supports_bf16 or not Precision(precision).needs_bf16


@pytest.mark.parametrize("model, method", [("mistralai/Mixtral-8x7B-v0.1", "lora"), ("Qwen/Qwen3-30B-A3B", "lora"),
                                           ("Qwen/Qwen1.5-MoE-A2.7B", "full")])
def test_moe_models_are_offered_tensor_parallel_plans_the_worker_runs(model, method):
    # experts split by expert (whole experts per rank); with and without sequence parallelism
    rows = plan_json(model, "--method", method, "--faster", "3")
    split = [row for row in rows if row["tp"] > 1]
    assert split and all(row["runnable"] for row in split)
    assert any(row["sequence_parallel"] for row in split)


def test_all_adds_the_plans_the_worker_does_not_run_with_the_workers_reason():
    runnable = plan_json("meta-llama/Llama-3.1-8B", "--seq", "4096")
    every = plan_json("meta-llama/Llama-3.1-8B", "--seq", "4096", "--all")
    job = JobSpec(model=load_model("meta-llama/Llama-3.1-8B"), seq_len=4096, global_batch=64)
    others = [r for r in every if not r["runnable"]]
    assert others and [r for r in every if r["runnable"]] == runnable  # the runnable plans are unchanged
    for row in others:
        assert row["not_runnable_reason"] == unsupported_reason(job, as_plan(row))
    table = run("plan", "meta-llama/Llama-3.1-8B", "--seq", "4096", "--gpus", "H100-SXM-80G", "--all")
    assert "no (1)" in table.output and "runs no (1): not runnable here: the worker" in table.output


@pytest.mark.parametrize("precision", ["bf16-mixed", "bf16"])
def test_gpus_without_bf16_never_get_bf16_plans(precision):
    for flags in ((), ("--all",)):
        rows = plan_json("meta-llama/Llama-3.2-1B", "--precision", precision, "--seq", "1024", *flags)
        assert rows and not {r["gpu_type"] for r in rows} & NO_BF16
    table = run("plan", "meta-llama/Llama-3.2-1B", "--seq", "1024", "--gpus", "A10G-24G,T4-16G", "--precision", precision)
    assert table.exit_code == 0 and "not planned, no bf16" in table.output and "T4-16G;" in table.output
    only_t4 = run("plan", "openai-community/gpt2", "--seq", "1024", "--gpus", "T4-16G", "--precision", precision)
    assert only_t4.exit_code == 2 and "fp16-mixed" in only_t4.output
    memory = run("memory", "openai-community/gpt2", "--seq", "1024", "--gpu", "T4-16G", "--precision", precision,
                 "--json")
    out = json.loads(memory.stdout)
    assert out["fits"] is False and "bf16" in out["fit_problem"]


def _memory_row(model, row, *flags):
    args = ["memory", model, "--gpu", row["gpu_type"], "--json", "--dp", str(row["dp"]), "--tp", str(row["tp"]),
            "--pp", str(row["pp"]), "--zero", str(row["zero"]), "--micro-batch", str(row["micro_batch"]),
            "--grad-accum", str(row["grad_accum"]), "--recompute", row["recompute"], *flags]
    if row["sequence_parallel"]:
        args.append("--sequence-parallel")
    result = run(*args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_memory_agrees_with_plan_on_every_plan_it_shows():
    rows = plan_json("meta-llama/Llama-3.1-8B", "--seq", "2048", "--global-batch", "32", "--faster", "3")
    for row in rows:
        out = _memory_row("meta-llama/Llama-3.1-8B", row, "--seq", "2048")
        assert out["fits"] is True and out["runnable"] is True
        assert out["required_bytes"] == row["memory"]["required_bytes"]
        assert out["mixed_precision"] == row["mixed_precision"]


def test_memory_and_plan_refuse_the_same_near_miss():
    # Llama-3.1-70B QLoRA, full recomputation, 2048 tokens: 43.3 GiB of an L40S's 44.3, inside the 5% margin
    flags = ("--method", "qlora", "--recompute", "full", "--seq", "2048")
    out = json.loads(run("memory", "meta-llama/Llama-3.1-70B", "--gpu", "L40S-48G", "--json", *flags).stdout)
    memory_bytes = catalog.gpu_type("L40S-48G").memory_bytes
    assert out["required_bytes"] < memory_bytes  # it would fit with no margin at all
    assert out["fits"] is (out["required_bytes"] <= 0.95 * memory_bytes) is False
    planned = run("plan", "meta-llama/Llama-3.1-70B", "--gpus", "L40S-48G", "--max-gpus", "1", "--global-batch", "1",
                  *flags)
    assert planned.exit_code == 2 and "margin" in planned.output


def test_zero_with_one_data_parallel_rank_warns():
    result = run("memory", "meta-llama/Llama-3.2-1B", "--zero", "3", "--json")
    assert result.exit_code == 0
    assert any("--dp 1 shards nothing" in w for w in json.loads(result.stdout)["warnings"])


def test_plan_shows_the_fewest_gpus_first_then_faster_plans_per_type():
    rows = plan_json("meta-llama/Llama-3.1-8B", "--seq", "4096", "--faster", "2")
    h100 = [r for r in rows if r["gpu_type"] == "H100-SXM-80G"]
    fewest = min(r["num_gpus"] for r in h100)
    # 8B full fine-tuning at 4096 tokens needs ~100 GB of states alone (16 B/param): not one GPU, and
    # sharded over 4 H100s it fits; a faster plan is offered beside it
    assert fewest > 1
    first = [r for r in h100 if r["num_gpus"] == fewest]
    assert len(h100) <= 3 and any(r["num_gpus"] > fewest for r in h100)
    assert all(r["predicted_time_s"] < min(f["predicted_time_s"] for f in first) for r in h100 if r not in first)
    table = run("plan", "meta-llama/Llama-3.1-8B", "--seq", "4096", "--gpus", "H100-SXM-80G", "--faster", "2")
    lines = [line for line in table.output.splitlines() if "H100-SXM-80G" in line]
    assert f"│    {fewest} │" in lines[0] and "free GiB" in table.output and "safety margin" in table.output


@pytest.mark.parametrize("flag, value", [("--faster", "-1"), ("--top", "0"), ("--max-gpus", "0")])
def test_bad_display_options_are_one_clean_error(flag, value):
    result = run("plan", "meta-llama/Llama-3.2-1B", flag, value)
    assert result.exit_code == 2 and f"{flag} must be >=" in result.output and "Traceback" not in result.output

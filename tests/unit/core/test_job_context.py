"""Sequence length against a model's positions: learned tables refuse, rotary and ALiBi warn."""

import json

import pytest
from typer.testing import CliRunner

from frenzy.cli.main import app
from frenzy.core import catalog
from frenzy.core.errors import InvalidConfigError
from frenzy.core.hf_config import load_model
from frenzy.core.job import JobSpec, context_warning


def job(model, seq):
    return JobSpec(model=load_model(model), seq_len=seq)


def test_qwen_v1_keeps_the_longer_of_seq_length_and_max_position_embeddings():
    cfg = catalog.model_config("Qwen/Qwen-14B")  # the published file: 2048 trained, 8192 via dynamic NTK
    assert (cfg["seq_length"], cfg["max_position_embeddings"], cfg["use_dynamic_ntk"]) == (2048, 8192, True)
    arch = load_model("Qwen/Qwen-14B")
    assert arch.max_position_embeddings == 8192 and arch.trained_seq_len == 2048


def test_qwen_14b_at_8192_is_accepted_with_a_warning_that_it_was_trained_at_2048():
    warning = context_warning(job("Qwen/Qwen-14B", 8192))
    assert "2048" in warning and "8192" in warning
    assert context_warning(job("Qwen/Qwen-14B", 2048)) is None


def test_qwen_v1_without_a_shorter_training_length_does_not_warn():
    cfg = catalog.model_config("Qwen/Qwen-72B")
    assert cfg["seq_length"] == cfg["max_position_embeddings"] == 32768
    assert load_model("Qwen/Qwen-72B").trained_seq_len == 0
    assert context_warning(job("Qwen/Qwen-72B", 32768)) is None


def test_rotary_model_past_its_positions_runs_with_a_warning():
    assert catalog.model_config("meta-llama/Llama-2-7b-hf")["max_position_embeddings"] == 4096
    warning = context_warning(job("meta-llama/Llama-2-7b-hf", 8192))
    assert "4096" in warning and "rotary" in warning
    assert context_warning(job("meta-llama/Llama-2-7b-hf", 4096)) is None


def test_rope_scaled_long_context_model_does_not_warn():
    # Llama 3.1's llama3 rope scaling serves 131072 positions (config.json max_position_embeddings).
    assert context_warning(job("meta-llama/Llama-3.1-8B", 65536)) is None


def test_alibi_model_past_its_positions_runs_with_a_warning():
    arch = load_model("bigscience/bloom-560m")
    assert "ALiBi" in context_warning(JobSpec(model=arch, seq_len=2 * arch.max_position_embeddings))


@pytest.mark.parametrize("model,positions", [("gpt2", 1024), ("facebook/opt-125m", 2048), ("EleutherAI/gpt-neo-1.3B", 2048)])
def test_learned_position_models_still_refuse(model, positions):
    assert load_model(model).max_position_embeddings == positions  # n_positions / max_position_embeddings in config.json
    job(model, positions)
    with pytest.raises(InvalidConfigError, match=f"exceeds the {positions} positions .* learned table"):
        job(model, positions + 1)


runner = CliRunner()


def test_memory_prints_the_warning_on_stderr_and_in_json():
    result = runner.invoke(app, ["memory", "Qwen/Qwen-14B", "--seq", "8192", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert len(out["warnings"]) == 1 and "2048" in out["warnings"][0]
    assert result.stderr.startswith("warning: ") and "2048" in result.stderr


def test_plan_prints_the_warning_on_stderr_and_in_json():
    result = runner.invoke(app, ["plan", "llama-2-7b", "--seq", "8192", "--global-batch", "8", "--gpus",
                                 "H100-SXM-80G", "--json"])
    assert result.exit_code == 0, result.output
    assert "4096" in json.loads(result.stdout)["warnings"][0]
    assert "warning: " in result.stderr


def test_no_warning_is_an_empty_list():
    result = runner.invoke(app, ["memory", "llama-3.2-1b", "--seq", "2048", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["warnings"] == [] and result.stderr == ""

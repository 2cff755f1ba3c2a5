"""Inline `hf_config`s of families WITH a formula whose fields are junk: each is planned or refused
with a 4xx, never a 500 (a string, list or infinity reaching a formula), and at once."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frenzy.core import catalog
from tests.unit.control.conftest import build_client
from tests.unit.control.test_hostile_inputs import _refused

JUNK = [1.5, -1, 0, 10**30, True, "x", None, [1], {"a": 1}, 2**31, -0.5, 1e308, -1e308, [], "", [[1]]]
# One model of each family with a formula; Llama 4 and Gemma 3 nest their sizes in text_config.
MODELS = ["openai-community/gpt2", "EleutherAI/pythia-160m", "facebook/opt-125m", "meta-llama/Llama-3.2-1B",
          "Qwen/Qwen2.5-0.5B", "Qwen/Qwen3-0.6B", "mistralai/Mistral-7B-v0.1", "mistralai/Mixtral-8x7B-v0.1",
          "google/gemma-2b", "google/gemma-2-2b", "google/gemma-3-1b-pt", "google/gemma-3-4b-pt",
          "microsoft/Phi-3-mini-4k-instruct", "microsoft/phi-2", "deepseek-ai/DeepSeek-V2-Lite",
          "meta-llama/Llama-4-Scout-17B-16E", "openai/gpt-oss-20b", "bigscience/bloom-560m"]
EXTRA = ("sliding_window", "rope_scaling", "layer_types", "head_dim", "num_key_value_heads", "quantization_config",
         "tie_word_embeddings", "text_config", "vision_config", "rope_theta")
SKIP = ("model_type", "architectures", "_frenzy_source", "_name_or_path", "transformers_version", "torch_dtype")


@pytest.mark.parametrize("model, field, value, words", [
    ("facebook/opt-125m", "word_embed_proj_dim", "x", ["embed_proj_dim must be an integer", "'x'"]),
    ("openai-community/gpt2", "n_positions", "x", ["max_position_embeddings must be an integer"]),
    ("openai-community/gpt2", "n_positions", "", ["max_position_embeddings must be an integer"]),
    ("EleutherAI/pythia-160m", "rotary_pct", 1e308, ["config.json is inconsistent", "infinity"]),
    ("EleutherAI/pythia-160m", "rotary_pct", -1e308, ["config.json is inconsistent"]),
    ("EleutherAI/gpt-neo-1.3B", "max_position_embeddings", 1e308, ["config.json is inconsistent"]),
    ("deepseek-ai/DeepSeek-V2-Lite", "first_k_dense_replace", -1e308, ["parameters, not a model Frenzy plans"]),
    ("deepseek-ai/DeepSeek-V2-Lite", "n_shared_experts", 1e308, ["about 10^316 parameters", "1 .. 1e+15"]),
    ("deepseek-ai/DeepSeek-V2-Lite", "q_lora_rank", 1e308, ["q_a: features must be integers"]),
    ("deepseek-ai/DeepSeek-V2-Lite", "q_lora_rank", 1.5, ["q_a: features must be integers, got 1.5"]),
])
def test_a_config_value_a_formula_cannot_take_is_a_422_naming_it(client, model, field, value, words):
    # Before: 500 (TypeError where a string met a number; OverflowError from int(inf) or from a
    # parameter count of 10^316 turned into a float); q_lora_rank 1.5 planned with fractional weights.
    config = {**catalog.model_config(model), field: value}
    detail = _refused(client, {"hf_config": config, "steps": 2})["detail"]
    assert all(w in detail for w in words), detail


@pytest.mark.parametrize("config", [
    {**catalog.model_config("openai-community/gpt2"), "num_labels": 10**6},
    {**catalog.model_config("Qwen/Qwen3-0.6B"), "id2label": {str(i): "x" for i in range(40_000)}},
    # a family without a formula: refused before the profiler builds it
    {"model_type": "arcee", "architectures": ["ArceeForCausalLM"], "hidden_size": 128, "intermediate_size": 256,
     "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 640,
     "max_position_embeddings": 256, "num_labels": 10**7},
])
def test_a_label_count_no_model_has_is_refused_before_transformers_builds_its_maps(client, config):
    # Before: accepted; transformers built 10^6-entry label maps and the profiler copied them for
    # half a minute and 360 MB, holding a request thread and the profiler's lock.
    detail = _refused(client, {"hf_config": config, "steps": 2})["detail"]
    assert "classification labels" in detail and ("num_labels=" in detail or "40,000 entries" in detail), detail


def _fields(config: dict) -> list[str]:
    keys = [k for k in config if k not in SKIP] + list(EXTRA)
    nested = [f"text_config.{k}" for k in config.get("text_config") or {} if k not in SKIP]
    return list(dict.fromkeys(keys + nested))


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    return build_client(tmp_path_factory.mktemp("configs"))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(data=st.data())
def test_any_junk_in_any_field_of_a_formula_family_is_planned_or_refused(shared, data):
    model = data.draw(st.sampled_from(MODELS))
    config = catalog.model_config(model)
    field = data.draw(st.sampled_from(_fields(config)))
    value = data.draw(st.sampled_from(JUNK))
    if field.startswith("text_config."):
        config = {**config, "text_config": {**config["text_config"], field.split(".", 1)[1]: value}}
    else:
        config = {**config, field: value}
    started = time.perf_counter()
    r = shared.post("/v1/jobs", json={"hf_config": config, "steps": 2})
    assert r.status_code in (201, 409, 422), (model, field, value, r.status_code, r.text[:300])
    assert time.perf_counter() - started < 5, (model, field, value)

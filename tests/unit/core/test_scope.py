"""Models Frenzy does not plan are refused up front, with the reason and a decoder-only alternative."""

import csv
import json

import pytest

from frenzy.core import catalog
from frenzy.core.errors import InvalidConfigError
from frenzy.core.hf_config import arch_from_config, load_model
from frenzy.core.scope import model_kind
from tests.conftest import DATA

PUBLISHED = {r["model"]: int(r["params"]) for r in csv.DictReader((DATA / "published_param_counts.csv").open())}

# Shape fields as the published config.json files of these models state them.
T5_SMALL = {"model_type": "t5", "architectures": ["T5ForConditionalGeneration"], "is_encoder_decoder": True,
            "d_model": 512, "d_ff": 2048, "num_layers": 6, "num_heads": 8, "vocab_size": 32128,
            "feed_forward_proj": "relu"}
BART_BASE = {"model_type": "bart", "architectures": ["BartModel"], "is_encoder_decoder": True, "d_model": 768,
             "encoder_layers": 6, "decoder_layers": 6, "encoder_ffn_dim": 3072, "vocab_size": 50265}
BERT_BASE = {"model_type": "bert", "architectures": ["BertForMaskedLM"], "hidden_size": 768, "num_hidden_layers": 12,
             "num_attention_heads": 12, "intermediate_size": 3072, "vocab_size": 30522}
MAMBA_130M = {"model_type": "mamba", "architectures": ["MambaForCausalLM"], "hidden_size": 768,
              "num_hidden_layers": 24, "state_size": 16, "intermediate_size": 1536, "vocab_size": 50280,
              "hidden_act": "silu", "conv_kernel": 4, "expand": 2}
JAMBA = {"model_type": "jamba", "architectures": ["JambaForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": 8, "mamba_d_state": 16, "attn_layer_period": 8,
         "intermediate_size": 14336, "vocab_size": 65536, "num_experts": 16}
NEXT = {"model_type": "qwen3_next", "architectures": ["Qwen3NextForCausalLM"], "hidden_size": 2048,
        "num_hidden_layers": 4, "num_attention_heads": 16,
        "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"]}
NEMOTRON_H = {"model_type": "nemotron_h", "hidden_size": 4096, "num_hidden_layers": 6, "num_attention_heads": 32,
              "hybrid_override_pattern": "M-M*-M", "ssm_state_size": 128}


@pytest.mark.parametrize("cfg,message", [
    (T5_SMALL, "Frenzy plans causal language models; t5 is an encoder-decoder model (is_encoder_decoder is true)"),
    (BART_BASE, "bart is an encoder-decoder model"),
    (BERT_BASE, "Frenzy plans causal language models; bert is an encoder-only model"),
    (dict(BERT_BASE, model_type="my-encoder"), "my-encoder is an encoder-only model (architectures BertForMaskedLM)"),
    (MAMBA_130M, "Frenzy plans causal language models; mamba is a state-space model (it sets state_size)"),
    (JAMBA, "jamba is a hybrid of attention and state-space or linear-attention layers (it sets mamba_d_state)"),
    (NEXT, "qwen3_next is a hybrid of attention and state-space or linear-attention layers "
           "(layer_types include linear_attention)"),
    (NEMOTRON_H, "nemotron_h is a hybrid of attention and state-space or linear-attention layers "
                 "(it sets ssm_state_size; hybrid_override_pattern has Mamba layers)"),
])
def test_each_kind_is_refused_with_its_reason(cfg, message):
    with pytest.raises(InvalidConfigError) as err:
        arch_from_config(dict(cfg), "m")
    assert message in str(err.value)


@pytest.mark.parametrize("cfg,published_size", [
    (T5_SMALL, 60e6),  # T5 paper: "Small" 60M parameters
    (BERT_BASE, 110e6),  # BERT paper: BERT-BASE 110M
    (MAMBA_130M, 130e6),  # Mamba paper / model name: 130M
])
def test_the_alternative_is_a_decoder_only_model_of_similar_published_size(cfg, published_size):
    with pytest.raises(InvalidConfigError) as err:
        arch_from_config(dict(cfg), "m")
    alternative = str(err.value).split("plan ")[-1].split(" instead")[0]
    assert alternative in catalog.model_names()
    assert 1 / 3 <= PUBLISHED[alternative] / published_size <= 3, alternative
    load_model(alternative)  # one frenzy can plan


def test_a_multimodal_config_is_judged_by_its_text_model():
    cfg = {"model_type": "some_vlm", "text_config": dict(MAMBA_130M), "vision_config": {"hidden_size": 64}}
    with pytest.raises(InvalidConfigError, match="mamba is a state-space model"):
        arch_from_config(cfg, "m")


def test_every_catalog_model_is_in_scope():
    for repo_id in catalog.model_names():
        cfg = catalog.model_config(repo_id)
        assert model_kind(cfg) is None and model_kind(cfg.get("text_config") or {}) is None, repo_id


def test_the_cli_prints_the_reason(tmp_path):
    from typer.testing import CliRunner

    from frenzy.cli.main import app

    path = tmp_path / "config.json"
    path.write_text(json.dumps(T5_SMALL))
    result = CliRunner().invoke(app, ["memory", str(path)])
    assert result.exit_code == 2
    assert "encoder-decoder" in result.output


def test_the_profiled_path_is_not_taken_for_an_out_of_scope_model():
    # The profiled path builds any model transformers knows; T5 is one, but not one Frenzy plans.
    with pytest.raises(InvalidConfigError, match="t5 is an encoder-decoder model"):
        arch_from_config(dict(T5_SMALL), "m", profiled=True)


def test_a_config_that_omits_its_state_space_keys_is_refused_by_its_class_defaults(tmp_path, monkeypatch):
    # {"model_type": "mamba"} shows nothing of its kind, and once reached the profiled path (which
    # built and traced it for a minute); transformers' MambaConfig defaults carry state_size.
    pytest.importorskip("transformers")

    monkeypatch.setenv("FRENZY_CACHE_DIR", str(tmp_path))
    with pytest.raises(InvalidConfigError, match="state-space model"):
        arch_from_config({"model_type": "mamba"}, "mamba")

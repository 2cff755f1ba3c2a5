"""The profiled path: families without a formula, described by their module tree and a traced profile."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from frenzy.core.errors import FrenzyError, InvalidConfigError
from frenzy.core.hf_config import load_model
from frenzy.core.job import JobSpec
from frenzy.core.training import TrainingConfig
from frenzy.memory.plans import check_plan, plan_notes
from frenzy.core.plan import ParallelPlan

pytest.importorskip("torch", reason="profiling needs the 'trace' extra (torch, transformers, peft)")
pytest.importorskip("transformers", reason="profiling needs the 'trace' extra (torch, transformers, peft)")

CONFIGS = Path(__file__).resolve().parents[2] / "data" / "profiled"

# Published totals (model cards / papers), independent of both transformers and Frenzy.
PUBLISHED_PARAMS = {
    "Qwen--Qwen3-30B-A3B": (30.5e9, "model card: 30.5B in total"),
    "openai--gpt-oss-20b": (20.91e9, "gpt-oss model card (paper): 20.91B total parameters"),
    "deepseek-ai--DeepSeek-V2-Lite": (15.7e9, "model card: 15.7B total parameters"),
    "allenai--OLMoE-1B-7B-0924": (6.9e9, "OLMoE paper: 6.9B total parameters"),
    "microsoft--Phi-3.5-MoE-instruct": (41.9e9, "model card: 41.9B total parameters"),
    "HuggingFaceTB--SmolLM3-3B": (3.08e9, "model card: 3B (3.08B) parameters"),
    "zai-org--GLM-4.5-Air": (106e9, "nominal: model card '106B total parameters'"),
    "databricks--dbrx-base": (132e9, "nominal: model card '132B total parameters'"),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED_PARAMS))
def test_profiled_parameter_counts_match_the_published_totals(name):
    expected, source = PUBLISHED_PARAMS[name]
    arch = load_model(str(CONFIGS / f"{name}.json"), profiled=True)
    assert arch.model_source == "profiled"
    # 0.5%, and for a nominal figure ("106B") half a unit of its last digit besides
    tolerance = 0.005 + (0.5e9 / expected if source.startswith("nominal") else 0)
    assert abs(arch.num_params - expected) / expected < tolerance


def test_heterogeneous_layers_are_counted_exactly():
    """DeepSeek-V2-Lite: a dense first layer and 26 MoE layers; Frenzy's count equals transformers' own."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = json.loads((CONFIGS / "deepseek-ai--DeepSeek-V2-Lite.json").read_text())
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(
            cfg["model_type"], **{k: v for k, v in cfg.items() if not k.startswith("_") and k != "model_type"}))
    assert load_model(str(CONFIGS / "deepseek-ai--DeepSeek-V2-Lite.json")).num_params == \
        sum(p.numel() for p in model.parameters())


def test_a_formula_family_profiled_agrees_with_its_formula_on_weights():
    formula, profiled = load_model("Qwen/Qwen3-0.6B"), load_model("Qwen/Qwen3-0.6B", profiled=True)
    assert profiled.num_params == formula.num_params
    assert profiled.model_source == "profiled" and formula.model_source == "formula"


def test_profiled_families_are_planned_without_tensor_parallelism_and_say_why():
    job = JobSpec(model=load_model(str(CONFIGS / "zai-org--GLM-4.5-Air.json")), training=TrainingConfig(),
                  seq_len=1024, global_batch=8)
    with pytest.raises(ValueError, match="planned without tensor parallelism"):
        check_plan(job, ParallelPlan(dp=1, tp=2))
    assert any("without tensor parallelism" in note for note in plan_notes(job))


def test_a_cached_family_is_predicted_without_torch(tmp_path):
    env = dict(os.environ, FRENZY_CACHE_DIR=str(tmp_path))
    config = str(CONFIGS / "LGAI-EXAONE--EXAONE-4.0-1.2B.json")
    argv = ["memory", config, "--seq", "1024", "--micro-batch", "2", "--precision", "bf16", "--json"]
    run = [sys.executable, "-m", "frenzy.cli.main", *argv]
    first = subprocess.run(run, env=env, capture_output=True, text=True, check=True)
    code = ("import sys, io, contextlib, json\nfrom frenzy.cli.main import app\nout = io.StringIO()\n"
            f"with contextlib.redirect_stdout(out):\n    try: app({argv!r})\n    except SystemExit: pass\n"
            "print(json.dumps({'heavy': [m for m in ('torch', 'transformers') if m in sys.modules], "
            "'out': json.loads(out.getvalue())}))\n")
    second = json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                       check=True).stdout)
    assert second["heavy"] == []
    assert second["out"] == json.loads(first.stdout)
    assert second["out"]["model_source"] == "profiled"


@pytest.mark.parametrize("change", [{"num_hidden_layers": 10**6}, {"num_experts": 10**7}, {"hidden_size": -8},
                                    {"num_hidden_layers": True}])
def test_a_config_too_large_to_build_is_refused_before_building(change, tmp_path):
    cfg = dict(json.loads((CONFIGS / "LGAI-EXAONE--EXAONE-4.0-1.2B.json").read_text()), **change)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(InvalidConfigError, match=f"{next(iter(change))}=.*positive integer up to"):
        load_model(str(path))


def test_an_unwritable_cache_says_where_to_point_it(tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("")  # a file where the cache folder should be
    monkeypatch.setenv("FRENZY_CACHE_DIR", str(blocked))
    with pytest.raises(FrenzyError, match="set FRENZY_CACHE_DIR to a writable folder"):
        load_model(str(CONFIGS / "LGAI-EXAONE--EXAONE-4.0-1.2B.json"))


def _cli_memory(config: Path, *extra: str) -> dict:
    run = [sys.executable, "-m", "frenzy.cli.main", "memory", str(config), "--micro-batch", "2", "--seq", "256",
           "--json", *extra]
    return json.loads(subprocess.run(run, capture_output=True, text=True, check=True).stdout)


def _meta_params(cfg: dict) -> int:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(
            cfg["model_type"], **{k: v for k, v in cfg.items() if not k.startswith("_") and k != "model_type"}))
    return sum(p.numel() for p in model.parameters())


# Gemma 4: one slice per layer of a packed per-layer input embedding, per-layer head sizes keyed by
# layer index (transformers' per_layer_config), and a last layer that must attend fully. GPT-1:
# transformers' Conv1D projections, and no activation checkpointing in transformers.
FAMILIES = {
    "gemma4_text": {"model_type": "gemma4_text", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 8,
                    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                    "layer_types": (["sliding_attention"] * 3 + ["full_attention"]) * 2,
                    "per_layer_config": {"03": {"head_dim": 32}, "07": {"head_dim": 32}}, "sliding_window": 64,
                    "hidden_size_per_layer_input": 16, "vocab_size_per_layer_input": 512, "vocab_size": 512,
                    "max_position_embeddings": 1024, "num_kv_shared_layers": 0, "tie_word_embeddings": True},
    "openai-gpt": {"model_type": "openai-gpt", "n_embd": 64, "n_head": 4, "n_layer": 4, "n_positions": 1024,
                   "vocab_size": 1024},
    # Inkling: short convolutions converted to fp32 in __init__ (a fake parameter's conversion), and two
    # shared experts stacked beside four routed ones
    "inkling_text": {"model_type": "inkling_text", "hidden_size": 64, "intermediate_size": 128, "head_dim": 16,
                     "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 4, "d_rel": 16,
                     "moe_intermediate_size": 64, "n_routed_experts": 4, "n_shared_experts": 2,
                     "num_experts_per_tok": 2, "swa_head_dim": 16, "swa_num_attention_heads": 4,
                     "swa_num_key_value_heads": 2, "vocab_size": 1024, "max_position_embeddings": 1024,
                     "bos_token_id": 1, "eos_token_id": 2},
    # Doge: a learned attention mask, which the CPU fused kernel refuses and CUDA's efficient one takes
    "doge": {"model_type": "doge", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
             "num_key_value_heads": 2, "num_hidden_layers": 4, "vocab_size": 1024, "max_position_embeddings": 1024,
             "keep_window_size": 2048, "is_moe": False},
    # Routing whose shapes are the data (frenzy.memory.trace.known_values): DBRX and LongCat-Flash loop
    # over nonzero() of the expert mask, JetMoE splits by the experts' counts as Python ints,
    # ModernBERT-decoder initialises with torch's truncated normal (a rejection loop on values)
    "dbrx": {"model_type": "dbrx", "d_model": 64, "n_heads": 4, "n_layers": 4, "max_seq_len": 1024, "vocab_size": 1024,
             "attn_config": {"kv_n_heads": 2, "clip_qkv": 8, "rope_theta": 500000},
             "ffn_config": {"ffn_hidden_size": 128, "moe_num_experts": 4, "moe_top_k": 2}},
    "jetmoe": {"model_type": "jetmoe", "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
               "num_key_value_heads": 2, "kv_channels": 16, "intermediate_size": 128, "num_local_experts": 4,
               "num_experts_per_tok": 2, "vocab_size": 1024, "max_position_embeddings": 1024},
    "longcat_flash": {"model_type": "longcat_flash", "hidden_size": 64, "num_layers": 2, "num_attention_heads": 4,
                      "vocab_size": 1024, "ffn_hidden_size": 128, "expert_ffn_hidden_size": 64, "n_routed_experts": 4,
                      "moe_topk": 2, "zero_expert_num": 2, "kv_lora_rank": 32, "q_lora_rank": 48,
                      "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "v_head_dim": 16, "head_dim": 8,
                      "max_position_embeddings": 1024},
    "modernbert-decoder": {"model_type": "modernbert-decoder", "hidden_size": 64, "intermediate_size": 128,
                           "num_hidden_layers": 4, "num_attention_heads": 4, "vocab_size": 1024, "pad_token_id": 0,
                           "bos_token_id": 1, "eos_token_id": 2, "cls_token_id": 1, "sep_token_id": 2,
                           "max_position_embeddings": 1024},
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_families_a_reduced_copy_cannot_hold_are_profiled_and_agree_with_a_full_trace(family, tmp_path, monkeypatch):
    # Before: Gemma 4 failed to trace (its per-layer config and embeddings sized for the full depth),
    # GPT-1 stopped with "max() arg is an empty sequence" (no nn.Linear) and then on checkpointing,
    # Doge with "No available kernel", Inkling with "Couldn't swap Conv1d.weight"; DBRX, JetMoE,
    # LongCat-Flash and ModernBERT-decoder with FakeTensorMode's data-dependent-output errors.
    monkeypatch.setenv("FRENZY_CACHE_DIR", str(tmp_path / "cache"))
    config = tmp_path / "config.json"
    config.write_text(json.dumps(FAMILIES[family]))
    predicted, traced = _cli_memory(config), _cli_memory(config, "--trace")
    assert predicted["model_source"] == "profiled" and predicted["params"] == _meta_params(FAMILIES[family])
    # the profile of a few layers, extrapolated, against the fake-tensor trace of the whole model
    assert predicted["allocated_bytes"] == pytest.approx(traced["allocated_bytes"], rel=0.05)
    assert predicted["breakdown"]["activations"] == pytest.approx(traced["breakdown"]["activations"], rel=0.05)


def test_a_family_transformers_cannot_checkpoint_is_planned_without_recomputation(tmp_path, monkeypatch):
    monkeypatch.setenv("FRENZY_CACHE_DIR", str(tmp_path / "cache"))
    config = tmp_path / "config.json"
    config.write_text(json.dumps(FAMILIES["openai-gpt"]))
    assert _cli_memory(config)["runnable"] is True
    for recompute in ("full", "selective"):
        out = _cli_memory(config, "--recompute", recompute)
        assert out["runnable"] is False and "does not support activation checkpointing" in out["not_runnable_reason"]


def test_a_convolution_in_a_layer_is_not_taken_for_stacked_experts(tmp_path, monkeypatch):
    # ZAYA's attention holds Conv1d weights (3-D, like transformers 5's fused experts) beside 16
    # experts: read as 1,280 experts, the model was predicted at 645 B parameters for its 8.8 B.
    monkeypatch.setenv("FRENZY_CACHE_DIR", str(tmp_path / "cache"))
    cfg = {"model_type": "zaya"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    arch = load_model(str(path))
    assert arch.model_source == "profiled" and arch.num_params == _meta_params(cfg)
    assert arch.num_experts == 16


def test_a_multimodal_config_whose_text_model_has_no_auto_mapping_is_planned_on_its_text_model(tmp_path, monkeypatch):
    # Emu3's text config ("emu3_text_model") is no key of transformers' causal-LM auto mapping, but
    # Emu3ForCausalLM is built on it; before, the config was refused as no causal LM.
    import torch
    from transformers import AutoConfig, Emu3ForCausalLM

    monkeypatch.setenv("FRENZY_CACHE_DIR", str(tmp_path / "cache"))
    text = {"model_type": "emu3_text_model", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
            "num_hidden_layers": 4, "num_key_value_heads": 2, "vocab_size": 1024, "max_position_embeddings": 1024,
            "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "emu3", "text_config": text}))
    with torch.device("meta"):
        model = Emu3ForCausalLM(AutoConfig.for_model(**text))
    arch = load_model(str(path))
    assert arch.model_source == "profiled" and arch.num_params == sum(p.numel() for p in model.parameters())


def test_a_model_type_transformers_does_not_know_is_refused_in_one_sentence(tmp_path, monkeypatch):
    # Before: transformers' own error, which lists all its ~1,000 model types (10 KB).
    monkeypatch.setenv("FRENZY_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "no_such_family"}))
    with pytest.raises(InvalidConfigError, match="'no_such_family' is neither a family") as info:
        load_model(str(path))
    assert len(str(info.value)) < 300


def test_the_layers_profiled_are_the_language_models_not_a_deeper_encoders(tmp_path, monkeypatch):
    # Phi-4-multimodal's vision (27) and audio (24) encoders hold more layers than a small language
    # model: taken for the decoder, they never ran in a text step ("KeyError: 'layer_pre.0'").
    monkeypatch.setenv("FRENZY_CACHE_DIR", str(tmp_path / "cache"))
    cfg = {"model_type": "phi4_multimodal", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4,
           "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1024, "pad_token_id": 0,
           "bos_token_id": 1, "eos_token_id": 2}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    arch = load_model(str(path))
    assert arch.num_layers == 4 and arch.num_params == _meta_params(cfg)
    predicted, traced = _cli_memory(path), _cli_memory(path, "--trace")
    assert predicted["breakdown"]["weights"] == pytest.approx(traced["breakdown"]["weights"], rel=0.01)
    # the encoders a text step never reads are stored without gradients or AdamW state, as the worker
    # freezes them (before: 16.2 GiB predicted against 3.3 GiB traced)
    assert predicted["allocated_bytes"] == pytest.approx(traced["allocated_bytes"], rel=0.01)


def test_layers_a_text_step_skips_are_profiled_as_keeping_nothing(tmp_path, monkeypatch):
    # Mllama's text model interleaves cross-attention layers (another class) that a step without an
    # image skips: before, no layer list was found, then the skipped layers' marks were missing.
    import torch
    from transformers import AutoConfig, MllamaForCausalLM

    monkeypatch.setenv("FRENZY_CACHE_DIR", str(tmp_path / "cache"))
    cfg = {"model_type": "mllama_text_model", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 8,
           "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1024, "cross_attention_layers": [3, 7],
           "max_position_embeddings": 1024, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with torch.device("meta"):
        model = MllamaForCausalLM(AutoConfig.for_model(**cfg))
    arch = load_model(str(path))
    # the head has 8 rows fewer than the embedding (image tokens), which the profiled model does not tell apart
    assert arch.num_params == pytest.approx(sum(p.numel() for p in model.parameters()), rel=0.002)
    predicted, traced = _cli_memory(path), _cli_memory(path, "--trace")
    assert predicted["allocated_bytes"] == pytest.approx(traced["allocated_bytes"], rel=0.05)
    assert predicted["breakdown"]["activations"] == pytest.approx(traced["breakdown"]["activations"], rel=0.05)
    # the cross-attention layers get no AdamW state (the worker freezes them; before: +21%)
    assert predicted["breakdown"]["optimizer_state"] == pytest.approx(traced["breakdown"]["optimizer_state"], rel=0.01)

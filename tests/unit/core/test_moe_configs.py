"""MoE families parsed from the published config.json files in tests/data/configs: parameter counts
against the model cards' totals and active counts, and against the module tree transformers builds
(on the meta device, when the trace extra is installed); configs the formulas cannot describe are
refused with a message saying what to change."""

import json

import pytest

from frenzy.core.errors import InvalidConfigError
from frenzy.core.hf_config import arch_from_config, load_model
from tests.conftest import DATA

CONFIGS = DATA / "configs"
# (config file, total, active) as the model cards state them: Qwen3 "30.5B in total and 3.3B
# activated", "235B / 22B"; OLMoE "6.9B total, 1.3B active"; Phi-3.5-MoE "42B, 6.6B active".
CARDS = [
    ("Qwen--Qwen3-30B-A3B", 30.5e9, 3.3e9),
    ("Qwen--Qwen3-235B-A22B", 235e9, 22e9),
    ("allenai--OLMoE-1B-7B-0924", 6.9e9, 1.3e9),
    ("microsoft--Phi-3.5-MoE-instruct", 42e9, 6.6e9),
]


def _config(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


@pytest.mark.parametrize(("name", "total", "active"), CARDS, ids=[c[0] for c in CARDS])
def test_counts_match_the_model_cards(name, total, active):
    arch = load_model(str(CONFIGS / f"{name}.json"))
    assert arch.name == name
    assert abs(arch.num_params - total) / total < 0.01
    assert abs(arch.active_params_per_token - active) / active < 0.03


@pytest.mark.parametrize("name", [c[0] for c in CARDS])
def test_counts_match_the_transformers_module_tree(name):
    torch = pytest.importorskip("torch", reason="needs the 'trace' extra")
    pytest.importorskip("transformers", reason="needs the 'trace' extra")
    from frenzy.memory.trace.build import hf_config
    from transformers import AutoModelForCausalLM

    cfg = _config(name)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(hf_config(cfg))
    assert load_model(str(CONFIGS / f"{name}.json")).num_params == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(("name", "experts"), [("Qwen--Qwen3-30B-A3B", 128), ("allenai--OLMoE-1B-7B-0924", 64)])
def test_either_spelling_of_the_expert_count(name, experts):
    """transformers' Qwen3-MoE and OLMoE configs map num_local_experts and num_experts onto each other."""
    cfg = _config(name)
    cfg["num_local_experts"] = cfg.pop("num_experts")
    assert arch_from_config(cfg, name).num_experts == experts


@pytest.mark.parametrize(("name", "change", "says"), [
    ("Qwen--Qwen3-30B-A3B", {"mlp_only_layers": [0, 1]}, "every layer is sparse"),
    ("Qwen--Qwen3-30B-A3B", {"decoder_sparse_step": 2}, "every layer is sparse"),
    ("allenai--OLMoE-1B-7B-0924", {"clip_qkv": 8.0}, "clip_qkv null"),
    ("microsoft--Phi-3.5-MoE-instruct", {"num_experts_per_tok": 4}, "num_experts_per_tok to 2"),
])
def test_unsupported_variants_are_refused_with_what_to_change(name, change, says):
    with pytest.raises(InvalidConfigError, match=says):
        arch_from_config({**_config(name), **change}, name)

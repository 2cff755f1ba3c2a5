"""Catalog configs typed from published config.json files, checked by building them with transformers.

A meta-device build allocates no memory, so each check takes well under a second once transformers
is imported. It tests the *file* (every shape field transformers reads), independently of frenzy's
own parsers, against the parameter count the model's authors published
(tests/data/published_param_counts.csv).

What is counted: every parameter transformers builds, tied matrices once. For a multimodal config
(one with `text_config`) the published figure decides: the Gemma 3 report splits text from vision,
so those rows compare the text decoder plus its (tied) LM head only; the Llama 4 cards give the
whole checkpoint, so those rows count text and vision together. Each CSV row's source says which.
"""

import csv

import pytest

from frenzy.core import catalog
from tests.conftest import DATA

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

PUBLISHED = {r["model"]: r for r in csv.DictReader((DATA / "published_param_counts.csv").open())}

# The entries added from published config.json files whose architectures frenzy's parsers may not
# cover yet; a transformers build is the independent check of the typed file.
TYPED = [
    "Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-235B-A22B",
    "google/gemma-3-1b-pt", "google/gemma-3-4b-pt", "google/gemma-3-12b-pt", "google/gemma-3-27b-pt",
    "meta-llama/Llama-4-Scout-17B-16E", "meta-llama/Llama-4-Maverick-17B-128E",
    "deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-V2-Lite",
    "openai/gpt-oss-20b", "openai/gpt-oss-120b",
    "allenai/OLMo-2-1124-7B", "allenai/OLMo-2-1124-13B",
    "microsoft/phi-4", "microsoft/Phi-4-mini-instruct",
    "mistralai/Mistral-Nemo-Base-2407", "mistralai/Mistral-Small-24B-Base-2501",
    "HuggingFaceTB/SmolLM3-3B", "ibm-granite/granite-3.1-8b-base", "meta-llama/Meta-Llama-3-8B",
]

# Parameter-name prefixes of the non-text parts of multimodal builds (transformers 5 module tree).
NON_TEXT = ("model.vision_tower.", "model.multi_modal_projector.", "vision_model.", "multi_modal_projector.")


def _build(cfg: dict):
    cfg = {k: v for k, v in cfg.items() if not k.startswith("_frenzy")}
    # Storage format (fp8 blocks, MXFP4 experts), not architecture: a meta build must not quantize.
    cfg.pop("quantization_config", None)
    cfg.pop("auto_map", None)  # the remote code it names is upstreamed into transformers
    config = transformers.CONFIG_MAPPING[cfg["model_type"]](**{k: v for k, v in cfg.items() if k != "model_type"})
    with torch.device("meta"):
        if "text_config" in cfg:
            return transformers.AutoModelForImageTextToText.from_config(config)
        return transformers.AutoModelForCausalLM.from_config(config)


def _counted(model, text_only: bool) -> int:
    # named_parameters() yields a tied matrix once, as the published counts count it.
    return sum(p.numel() for name, p in model.named_parameters() if not (text_only and name.startswith(NON_TEXT)))


def _tolerance(row) -> float:
    """0.5%; a nominal figure ("235B") may also be off by half a unit of its last digit."""
    if not row["source"].startswith("approx"):
        return 0.005
    value = int(row["params"])
    unit = 10 ** (len(str(value)) - len(str(value).rstrip("0")))
    return 0.005 + 0.5 * unit / value


def test_every_typed_entry_is_in_the_catalog_with_a_published_count():
    assert set(TYPED) <= set(catalog.model_names())
    assert set(TYPED) <= set(PUBLISHED)


@pytest.mark.parametrize("repo_id", TYPED)
def test_meta_build_matches_the_published_count(repo_id):
    row = PUBLISHED[repo_id]
    cfg = catalog.model_config(repo_id)
    text_only = "TEXT model only" in row["source"]
    assert not text_only or "text_config" in cfg, "a text-only comparison needs a multimodal config"
    counted = _counted(_build(cfg), text_only)
    published = int(row["params"])
    assert abs(counted - published) / published <= _tolerance(row), (counted, published)


def test_multimodal_entries_keep_the_published_nesting():
    # The published gemma3 / llama4 files nest the decoder under text_config; flattening them would
    # make the file something no checkpoint ships.
    for repo_id in ("google/gemma-3-4b-pt", "meta-llama/Llama-4-Scout-17B-16E"):
        cfg = catalog.model_config(repo_id)
        assert "hidden_size" not in cfg and cfg["text_config"]["hidden_size"] > 0
        assert "vision_config" in cfg


def test_mistral_nemo_head_dim_is_not_hidden_over_heads():
    # 5120 / 32 = 160, but Nemo's heads are 128 wide: its q projection is 4096 wide.
    model = _build(catalog.model_config("mistralai/Mistral-Nemo-Base-2407"))
    assert tuple(model.model.layers[0].self_attn.q_proj.weight.shape) == (32 * 128, 5120)

"""Post-training variants resolve to their base model's config; the display name stays as typed."""

import pytest

from frenzy.core import catalog
from frenzy.core.errors import UnknownNameError
from frenzy.core.hf_config import load_config
from frenzy.core.model_names import architecture_key


@pytest.fixture(autouse=True)
def empty_hf_cache(tmp_path, monkeypatch):
    # A developer's real cache must not decide what these names resolve to.
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))


# (typed, the base repo whose architecture the model card says it shares)
VARIANTS = [
    ("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B"),
    ("meta-llama/Meta-Llama-3-8B-Instruct", "meta-llama/Meta-Llama-3-8B"),
    ("mistralai/Mistral-Nemo-Instruct-2407", "mistralai/Mistral-Nemo-Base-2407"),
    ("mistralai/Mistral-Small-24B-Instruct-2501", "mistralai/Mistral-Small-24B-Base-2501"),
    ("google/gemma-3-4b-it", "google/gemma-3-4b-pt"),
    ("google/gemma-2-2b-it", "google/gemma-2-2b"),
    ("Qwen/Qwen3-30B-A3B-Instruct-2507", "Qwen/Qwen3-30B-A3B"),
    ("Qwen/Qwen3-235B-A22B-Thinking-2507", "Qwen/Qwen3-235B-A22B"),
    ("Qwen/Qwen3-8B-Base", "Qwen/Qwen3-8B"),
    ("meta-llama/Llama-2-7b-chat-hf", "meta-llama/Llama-2-7b-hf"),
    ("Qwen/Qwen-7B-Chat", "Qwen/Qwen-7B"),
    ("ibm-granite/granite-3.1-8b-instruct", "ibm-granite/granite-3.1-8b-base"),
    ("deepseek-ai/DeepSeek-V2-Lite-Chat", "deepseek-ai/DeepSeek-V2-Lite"),
    ("mistral-7b-instruct-v0.1", "mistralai/Mistral-7B-v0.1"),
    ("gemma-3-12b", "google/gemma-3-12b-pt"),  # the family name alone answers to the pretrained model
]


@pytest.mark.parametrize("typed,base", VARIANTS)
def test_post_training_variant_resolves_to_its_base(typed, base):
    assert catalog.canonical_model_name(typed) == base


@pytest.mark.parametrize("typed,base", VARIANTS[:4])
def test_variant_loads_the_base_config_under_the_typed_name(typed, base):
    cfg, display = load_config(typed)
    assert cfg == catalog.model_config(base)
    assert display == typed


def test_a_bundled_variant_wins_over_its_base():
    # Llama-3.1-8B-Instruct is in the catalog itself: its own file, its canonical name.
    assert catalog.canonical_model_name("meta-llama/Llama-3.1-8B-Instruct") == "meta-llama/Llama-3.1-8B-Instruct"
    assert load_config("llama-3.1-8b-instruct")[1] == "meta-llama/Llama-3.1-8B-Instruct"


def test_meta_llama_3_is_its_own_config_not_llama_3_1():
    llama3 = catalog.model_config("meta-llama/Meta-Llama-3-8B")
    llama31 = catalog.model_config("meta-llama/Llama-3.1-8B")
    assert llama3["max_position_embeddings"] == 8192 and llama3["rope_scaling"] is None
    assert llama31["max_position_embeddings"] == 131072
    shape = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
             "vocab_size")
    assert all(llama3[k] == llama31[k] for k in shape)


@pytest.mark.parametrize("typed", [
    "mistralai/Mistral-7B-Instruct-v0.2",  # v0.2 changed rope_theta and dropped the sliding window
    "unsloth/Qwen2.5-7B-Instruct",  # another organisation's fine-tune may change the architecture
    "Qwen/Qwen2.5-7B-Instruct-AWQ",  # quantised weights change memory
])
def test_names_that_are_not_plain_variants_stay_unknown_with_suggestions(typed):
    with pytest.raises(UnknownNameError, match="Did you mean"):
        catalog.canonical_model_name(typed)


def test_unknown_name_still_suggests_close_names():
    with pytest.raises(UnknownNameError) as err:
        load_config("Qwen/Qwen2.5-8B-Instruct")
    assert "Qwen/Qwen2.5-7B" in str(err.value)


@pytest.mark.parametrize("key,expected", [
    ("qwen/qwen2.5-7b-instruct", "qwen/qwen2.5-7b"),
    ("mistral-nemo-base-2407", "mistral-nemo"),
    ("qwen3-30b-a3b-instruct-2507", "qwen3-30b-a3b"),
    ("qwen-1-8b", "qwen-1-8b"),  # digits are not a release tag without a post-training token
    ("phi-3-mini-4k-instruct", "phi-3-mini-4k"),
    ("instruct", "instruct"),  # never reduced to nothing
])
def test_architecture_key(key, expected):
    assert architecture_key(key) == expected

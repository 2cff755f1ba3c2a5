"""Repo ids outside the catalog are found offline in the local Hugging Face cache."""

import json
import subprocess
import sys

import pytest

from frenzy.core import catalog, hf_cache
from frenzy.core.errors import InvalidConfigError, UnknownNameError
from frenzy.core.hf_config import load_config, load_model

REVISION = "0123456789abcdef0123456789abcdef01234567"


def _cache_model(hub, repo_id, cfg, revision=REVISION, ref=True):
    """Lay out a download the way huggingface_hub does (blobs linked from snapshots)."""
    repo = hub / ("models--" + repo_id.replace("/", "--"))
    blob = repo / "blobs" / f"blob-{revision}"
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_text(cfg if isinstance(cfg, str) else json.dumps(cfg))
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").symlink_to(blob)
    if ref:
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / "main").write_text(revision)
    return snapshot / "config.json"


@pytest.fixture
def hub(tmp_path, monkeypatch):
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    (tmp_path / "hub").mkdir()
    return tmp_path / "hub"


# A config no catalog entry holds: a 2-layer Llama with numbers chosen here.
TINY = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 256, "intermediate_size": 512,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
        "max_position_embeddings": 1024, "tie_word_embeddings": False}


def test_a_cached_repo_is_found_by_its_repo_id(hub):
    _cache_model(hub, "someorg/tiny-llama", TINY)
    cfg, display = load_config("someorg/tiny-llama")
    assert cfg == TINY and display == "someorg/tiny-llama"
    # embeddings + head 2*1000*256, per layer q,o 256*256 + k,v 256*128 + 3*256*512 + 2 norms, final norm
    per_layer = 2 * 256 * 256 + 2 * 256 * 128 + 3 * 256 * 512 + 2 * 256
    assert load_model("someorg/tiny-llama").num_params == 2 * 1000 * 256 + 2 * per_layer + 256


def test_refs_main_picks_the_revision(hub):
    _cache_model(hub, "someorg/tiny-llama", dict(TINY, num_hidden_layers=3), revision="a" * 40, ref=False)
    _cache_model(hub, "someorg/tiny-llama", TINY, revision="b" * 40)
    assert load_config("someorg/tiny-llama")[0]["num_hidden_layers"] == 2


def test_without_refs_main_the_only_snapshot_is_used(hub):
    _cache_model(hub, "someorg/pinned", TINY, ref=False)
    assert load_config("someorg/pinned")[0] == TINY


def test_repo_id_case_need_not_match_the_download(hub):
    _cache_model(hub, "SomeOrg/Tiny-Llama", TINY)
    assert load_config("someorg/tiny-llama")[0] == TINY


def test_hf_home_is_used_when_hf_hub_cache_is_unset(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert hf_cache.hub_cache_dir() == tmp_path / "hf" / "hub"
    _cache_model(tmp_path / "hf" / "hub", "someorg/tiny-llama", TINY)
    assert load_config("someorg/tiny-llama")[0] == TINY


def test_default_cache_is_under_the_home_directory(tmp_path, monkeypatch):
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert hf_cache.hub_cache_dir() == tmp_path / ".cache" / "huggingface" / "hub"


def test_an_oversized_config_is_refused_with_a_message(hub):
    _cache_model(hub, "someorg/huge", json.dumps(dict(TINY, padding="x" * (1 << 20))))
    with pytest.raises(InvalidConfigError, match="over the 1,048,576 a config.json can be"):
        load_config("someorg/huge")


def test_a_cached_file_that_is_not_json_says_to_download_again(hub):
    _cache_model(hub, "someorg/broken", "{not json")
    with pytest.raises(InvalidConfigError, match="download someorg/broken again"):
        load_config("someorg/broken")


def test_the_catalog_wins_over_the_cache_for_its_own_names(hub):
    _cache_model(hub, "Qwen/Qwen2.5-7B", TINY)
    assert load_config("Qwen/Qwen2.5-7B")[0] == catalog.model_config("Qwen/Qwen2.5-7B")


def test_a_cached_variant_beats_the_base_alias(hub):
    # The downloaded file is the model's own; the alias only assumes the fine-tune kept the shapes.
    _cache_model(hub, "Qwen/Qwen2.5-7B-Instruct", dict(TINY, model_type="qwen2"))
    assert load_config("Qwen/Qwen2.5-7B-Instruct")[0]["hidden_size"] == 256


def test_a_name_in_neither_place_gets_suggestions(hub):
    with pytest.raises(UnknownNameError, match="Did you mean"):
        load_config("meta-llama/Llama-3.2-2B")


def test_reading_the_cache_does_not_import_huggingface_hub(hub):
    _cache_model(hub, "someorg/tiny-llama", TINY)
    code = ("import sys\nfrom frenzy.core.hf_config import load_model\nload_model('someorg/tiny-llama')\n"
            "print('huggingface_hub' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"

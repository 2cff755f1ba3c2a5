"""Catalogs: every bundled architecture's parameter count matches its published count."""

import csv
import math

import pytest

from frenzy.core import catalog
from frenzy.core.errors import UnknownNameError
from frenzy.core.hf_config import PARSERS, load_model
from tests.conftest import DATA

PUBLISHED = list(csv.DictReader((DATA / "published_param_counts.csv").open()))


def _tolerance(row) -> float:
    """0.5% for exact published counts; for nominal counts ("2.7B") add half a unit of the last digit."""
    if not row["source"].startswith("approx"):
        return 0.005
    value = int(row["params"])
    significant = str(value).rstrip("0")
    unit = 10 ** (len(str(value)) - len(significant))
    return 0.005 + 0.5 * unit / value


def test_every_catalog_model_has_a_published_count():
    assert {r["model"] for r in PUBLISHED} == set(catalog.model_names())


@pytest.mark.parametrize("row", PUBLISHED, ids=[r["model"] for r in PUBLISHED])
def test_parameter_count_matches_published(row):
    model_type = catalog.model_config(row["model"]).get("model_type")
    if "whole checkpoint" in row["source"]:
        # Frenzy plans the language model; test_catalog_meta_counts checks the whole checkpoint
        # (and test_recent_moe_counts the Llama 4 language model against transformers' own count)
        pytest.skip(f"{row['model']}: the published total includes the vision encoder")
    if model_type not in PARSERS:
        pytest.importorskip("transformers", reason="a family without a parser is counted from its module tree")
    arch = load_model(row["model"])
    counted = arch.num_params
    if row["counts_tied_head_twice"] == "1":  # the checkpoint stores the tied LM head a second time
        counted += arch.vocab_size * (arch.embed_proj_dim or arch.hidden_size)
    published = int(row["params"])
    assert abs(counted - published) / published <= _tolerance(row), (counted, published)


def test_model_aliases_resolve_case_insensitively():
    assert catalog.canonical_model_name("LLAMA-2-7B") == "meta-llama/Llama-2-7b-hf"
    assert catalog.canonical_model_name("mistral-7b") == "mistralai/Mistral-7B-v0.1"
    assert catalog.canonical_model_name("gpt2") == "openai-community/gpt2"


def test_unknown_model_suggests_close_names():
    with pytest.raises(UnknownNameError) as err:
        catalog.canonical_model_name("llama-3.1-8")
    assert "meta-llama/Llama-3.1-8B" in str(err.value)


def test_a_name_close_to_nothing_gets_the_list_or_where_to_find_it():
    with pytest.raises(UnknownNameError, match="`frenzy gpus` lists them"):
        catalog.gpu_type("qqqqqq")  # 32 bundled types: too many to list (short lists: test_policies, test_traces)
    with pytest.raises(UnknownNameError, match="`frenzy models` lists them"):
        catalog.canonical_model_name("qqqqqq")  # too many to list


REQUIRED_GPUS = """H100-SXM-80G H100-PCIe-80G H200-141G GH200-96G A100-SXM-80G A100-SXM-40G A100-PCIe-80G
A100-PCIe-40G A800-80G H800-80G L40S-48G L40-48G A40-48G A10-24G A10G-24G L4-24G A6000-48G RTX-4090-24G
RTX-3090-24G V100-SXM-32G V100-SXM-16G V100-PCIe-16G T4-16G P100-16G RTX-2080Ti-11G Quadro-RTX6000-24G""".split()


def test_gpu_catalog_has_every_required_type():
    assert set(REQUIRED_GPUS) <= set(catalog.gpu_types())


@pytest.mark.parametrize("name", ["V100-SXM-16G", "T4-16G", "P100-16G", "RTX-2080Ti-11G"])
def test_pre_ampere_gpus_lack_bf16(name):
    assert not catalog.gpu_type(name).supports_bf16


def test_gpu_memory_is_usable_bytes_not_marketing_gb():
    # torch reports 79.15 GiB for an 80 GB A100 and 39.39 GiB for the 40 GB part (NVIDIA deviceQuery).
    assert math.isclose(catalog.gpu_type("A100-SXM-80G").memory_bytes / 2**30, 79.15, abs_tol=0.05)
    assert math.isclose(catalog.gpu_type("A100-SXM-40G").memory_bytes / 2**30, 39.39, abs_tol=0.05)


def test_gpu_aliases_include_the_nvml_name():
    assert catalog.gpu_type("NVIDIA H100 80GB HBM3").name == "H100-SXM-80G"
    with pytest.raises(UnknownNameError, match="Did you mean"):
        catalog.gpu_type("H100-SXM-81G")

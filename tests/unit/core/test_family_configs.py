"""Parameter counts of the families validated on published configs (tests/data/configs) against the
model transformers builds from the same config on the meta device: exact, at full depth."""

import json
from pathlib import Path

import pytest

from frenzy.core.hf_config import load_model

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "data" / "configs").glob("*.json"))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_parameter_count_matches_transformers(path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from frenzy.memory.trace.build import hf_config, language_model_config
    from transformers import AutoModelForCausalLM

    cfg = language_model_config(json.loads(path.read_text()))
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(hf_config(cfg))
    assert load_model(str(path)).num_params == sum(p.numel() for p in model.parameters())

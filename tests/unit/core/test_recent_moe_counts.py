"""gpt-oss and Llama 4 parameter counts from their formula parsers, against transformers' own
meta-device build of the causal language model (Llama 4: the text model on `text_config`), including
shrunk configs whose dense and MoE layers interleave."""

import pytest

from frenzy.core import catalog
from frenzy.core.generic import text_config
from frenzy.core.hf_config import arch_from_config

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

SHRUNK_LLAMA4 = dict(hidden_size=256, intermediate_size=256, intermediate_size_mlp=512, num_attention_heads=4,
                     num_key_value_heads=2, head_dim=64, num_local_experts=4, vocab_size=1000, num_hidden_layers=6,
                     pad_token_id=0, bos_token_id=1, eos_token_id=2)
CASES = [
    ("openai/gpt-oss-20b", {}),
    ("openai/gpt-oss-120b", {}),
    ("meta-llama/Llama-4-Scout-17B-16E", {}),
    ("meta-llama/Llama-4-Maverick-17B-128E", {}),
    ("meta-llama/Llama-4-Scout-17B-16E", dict(SHRUNK_LLAMA4, interleave_moe_layer_step=2)),
    ("meta-llama/Llama-4-Scout-17B-16E", dict(SHRUNK_LLAMA4, moe_layers=[0, 4], use_qk_norm=False)),
    ("meta-llama/Llama-4-Scout-17B-16E", dict(SHRUNK_LLAMA4, moe_layers=[])),
]


def _transformers_count(cfg: dict) -> int:
    cfg = {k: v for k, v in text_config(cfg).items() if not k.startswith("_") and k != "quantization_config"}
    config = transformers.AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(("name", "changes"), CASES, ids=[f"{n}{'-shrunk' if c else ''}-{i}" for i, (n, c) in
                                                        enumerate(CASES)])
def test_formula_parameter_count_is_exact(name, changes):
    cfg = dict(catalog.model_config(name))
    if "text_config" in cfg:
        cfg["text_config"] = {**cfg["text_config"], **changes}
    else:
        cfg.update(changes)
    arch = arch_from_config(cfg, name)
    assert arch.model_source == "formula"
    assert arch.num_params == _transformers_count(cfg)

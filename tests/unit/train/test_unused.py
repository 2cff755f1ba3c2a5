"""Parameters a text step never reads are frozen, so a multimodal model trains under DDP (which
waits for a gradient of every trainable parameter). The reference is a real backward: the
parameters it leaves without a gradient."""

from __future__ import annotations

import pytest
import torch

from frenzy.train.model import build_base
from frenzy.train.unused import freeze_unused
from tests.unit.train.dist_helpers import base_config, run_world

SMALL = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=1024, pad_token_id=0)
TINY_ENCODERS = {
    "vision_config": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                      "image_size": 28, "crop_size": 28},
    "audio_config": {"hidden_size": 32, "intermediate_size": 64, "num_blocks": 2, "num_attention_heads": 2,
                     "ext_pw_out_channel": 32, "depthwise_separable_out_channel": 32, "nemo_conv_channels": 32},
}
CONFIGS = {
    # vision and audio encoders beside the language model
    "phi4_multimodal": {"model_type": "phi4_multimodal", **SMALL, "bos_token_id": 1, "eos_token_id": 2,
                        **TINY_ENCODERS},
    # a cross-attention layer runs only beside an image
    "mllama": {"model_type": "mllama", "text_config": {**SMALL, "model_type": "mllama_text_model",
                                                       "cross_attention_layers": [1]}},
    # 16 experts, one per token: the probe's 8 tokens leave experts out, a layer that ran keeps them
    "qwen3_moe": {"model_type": "qwen3_moe", **SMALL, "num_experts": 16, "num_experts_per_tok": 1,
                  "moe_intermediate_size": 32},
    "llama": {"model_type": "llama", **SMALL},
}


def _without_gradient(hf_config: dict) -> list[str]:
    model = build_base(hf_config, seed=0)
    ids = torch.randint(0, SMALL["vocab_size"], (4, 32), generator=torch.Generator().manual_seed(0))
    model(input_ids=ids, labels=ids).loss.backward()
    return sorted(name for name, p in model.named_parameters() if p.grad is None)


@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_what_is_frozen_is_what_a_backward_leaves_without_gradient(family):
    model = build_base(CONFIGS[family], seed=0)
    frozen = freeze_unused(model)
    assert sorted(frozen) == _without_gradient(CONFIGS[family])
    assert sorted(n for n, p in model.named_parameters() if not p.requires_grad) == sorted(frozen)
    assert bool(frozen) == (family in ("phi4_multimodal", "mllama"))


@pytest.mark.slow
@pytest.mark.parametrize("family", ["phi4_multimodal", "mllama"])
def test_a_multimodal_model_trains_under_ddp(tmp_path, family):
    results = run_world(base_config(tmp_path, hf_config=CONFIGS[family], family=family, model_name=family,
                                    dp=2, zero=0, micro_batch=1, grad_accum=2, steps=3), 2, tmp_path)
    assert [r.get("error") for r in results] == [None, None]
    assert [r["step"] for r in results[0]["reports"] if "step" in r][-1] == 3

"""Parsers of the recent mixture-of-experts families whose layers depart furthest from Mixtral's:
gpt-oss (attention sinks, biased experts with a clamped SwiGLU, softmax after top-k) and Llama 4
(interleaved dense and MoE layers, a sigmoid-gated single expert beside a shared one, NoPE layers)."""

from __future__ import annotations

from frenzy.core.hf_blocks import Config, attention_projections, common_fields, config_value, gated_mlp
from frenzy.core.model import ModelArch, Router
from frenzy.core.parsers_dense import _layer_pattern_globals


def parse_gpt_oss(cfg: Config, name: str) -> ModelArch:
    """gpt-oss: q/k/v/o with biases and a learned per-head sink logit, which leaves transformers no
    SDPA path (eager attention, its softmax in the logits' dtype); alternating sliding-window and full
    layers (`layer_types`); fused experts (gate_up and down, each with a bias per expert) running
    `(up + 1) * gate * sigmoid(alpha * gate)` on clamped halves; a biased router whose softmax runs
    over the top-k logits only. RMSNorm scales in fp32 before casting back."""
    base = common_fields(cfg, name)
    h, inter = base["hidden_size"], config_value(cfg, "intermediate_size")
    experts = config_value(cfg, "num_local_experts")
    bias = cfg.get("attention_bias", True)
    linears = attention_projections(h, base["num_heads"], base["num_kv_heads"], base["head_dim"], qkv_bias=bias,
                                    o_bias=bias)
    linears += gated_mlp(h, inter, bias=True, per_expert=True, fused=True)
    window = int(cfg.get("sliding_window") or 0)
    # two norms, the router's weight and bias, one sink per head
    other = 2 * h + experts * (h + 1) + base["num_heads"]
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears), rotary_dim=base["head_dim"],
                     num_experts=experts, experts_per_token=config_value(cfg, "num_experts_per_tok", "experts_per_token"),
                     router=Router.TOPK_SOFTMAX, router_norm_topk=False, router_weights_fp32=False,
                     activation="swiglu_clamped", norm_fp32_output=True, rope_concat=True,
                     sdpa_supported=False, eager_softmax_fp32=False, attention_sinks=True,
                     sliding_window=window, global_layers=_layer_pattern_globals(cfg, 2) if window else 0,
                     layer_other_params=other, attention_dropout=cfg.get("attention_dropout", 0.0))

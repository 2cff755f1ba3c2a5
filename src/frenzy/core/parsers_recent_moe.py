"""Parsers of the recent mixture-of-experts families whose layers depart furthest from Mixtral's:
gpt-oss (attention sinks, biased experts with a clamped SwiGLU, softmax after top-k) and Llama 4
(interleaved dense and MoE layers, a sigmoid-gated single expert beside a shared one, NoPE layers)."""

from __future__ import annotations

from frenzy.core.hf_blocks import Config, attention_projections, common_fields, config_value, gated_mlp, projection
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


def _llama4_layer_lists(cfg: Config) -> tuple[list[int], list[int]]:
    """(MoE layer indices, per-layer RoPE flags) as Llama4TextConfig derives them when not stated:
    MoE every `interleave_moe_layer_step`-th layer, and RoPE on all but every 4th layer
    (`no_rope_layers[i]` is 1 where layer i uses RoPE)."""
    layers = config_value(cfg, "num_hidden_layers")
    step = cfg.get("interleave_moe_layer_step") or 1
    moe = cfg.get("moe_layers")
    moe = list(range(step - 1, layers, step)) if moe is None else [i for i in moe if i < layers]
    interval = cfg.get("no_rope_layer_interval") or 4
    rope = cfg.get("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(layers)]
    return moe, list(rope[:layers])


def parse_llama4_text(cfg: Config, name: str) -> ModelArch:
    """Llama 4's language model: MoE layers (a sigmoid-scored routed expert, top-1, whose score scales
    the expert's input, beside an always-on shared expert) interleaved with dense layers of width
    `intermediate_size_mlp`; RoPE layers attend in chunks (`attention_chunk_size`) after an L2 norm on
    q and k (`use_qk_norm`); NoPE layers attend globally with a temperature-scaled q.

    The MoE layer is the common one; the dense layers' difference in parameters goes to the
    irregular_* fields (negative where a dense MLP is smaller than the MoE block it replaces)."""
    base = common_fields(cfg, name)
    h, inter = base["hidden_size"], config_value(cfg, "intermediate_size")
    inter_mlp = config_value(cfg, "intermediate_size_mlp", default=inter)
    experts = config_value(cfg, "num_local_experts")
    moe, rope = _llama4_layer_lists(cfg)
    bias = cfg.get("attention_bias", False)
    linears = attention_projections(h, base["num_heads"], base["num_kv_heads"], base["head_dim"], qkv_bias=bias,
                                    o_bias=bias)
    if not moe:  # every layer dense: a Llama-shaped model
        return ModelArch(**base, intermediate_size=inter_mlp, linears=tuple(linears + gated_mlp(h, inter_mlp)),
                         rotary_dim=base["head_dim"], layer_other_params=2 * h, nope_layers=rope.count(0),
                         qk_norm=bool(cfg.get("use_qk_norm", True)), qk_l2_norm=bool(cfg.get("use_qk_norm", True)),
                         attention_chunk=int(cfg.get("attention_chunk_size") or 0))
    routed = gated_mlp(h, inter, per_expert=True, fused=True)
    shared = [projection(f"shared_{lin.name}", lin.in_features, lin.out_features, False, lin.split, {lin.name})
              for lin in gated_mlp(h, inter)]
    dense = len(rope) - len(moe)
    routed_params, shared_linear = sum(lin.params * experts for lin in routed), sum(lin.params for lin in shared)
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears + routed + shared),
                     rotary_dim=base["head_dim"], num_experts=experts,
                     experts_per_token=config_value(cfg, "num_experts_per_tok", default=1),
                     shared_expert_size=inter, router=Router.TOPK_SIGMOID, router_norm_topk=False,
                     router_weights_fp32=False, layer_other_params=2 * h + h * experts,
                     irregular_linear_params=dense * (3 * h * inter_mlp - shared_linear),
                     irregular_other_params=-dense * (h * experts + routed_params),
                     qk_norm=bool(cfg.get("use_qk_norm", True)), qk_l2_norm=bool(cfg.get("use_qk_norm", True)),
                     dense_layers=dense, dense_intermediate_size=inter_mlp, nope_layers=rope.count(0),
                     attention_chunk=int(cfg.get("attention_chunk_size") or 0),
                     attention_dropout=cfg.get("attention_dropout", 0.0))


def parse_llama4(cfg: Config, name: str) -> ModelArch:
    """Llama 4 multimodal config: the causal language model on its `text_config`."""
    text = dict(cfg.get("text_config") or {})
    text.setdefault("tie_word_embeddings", cfg.get("tie_word_embeddings", False))
    text["model_type"] = "llama4_text"
    return parse_llama4_text(text, name)

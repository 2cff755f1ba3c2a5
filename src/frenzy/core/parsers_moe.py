"""Parsers of the mixture-of-experts families: experts, routers and shared experts as HF builds them."""

from __future__ import annotations

from frenzy.core.errors import InvalidConfigError
from frenzy.core.model import ModelArch, Norm, Router
from frenzy.core.hf_blocks import (Config, attention_projections, common_fields, gated_mlp, config_value,
                                   projection, sliding_window_of)


def parse_mixtral(cfg, name):
    base = common_fields(cfg, name)
    h, inter = base["hidden_size"], config_value(cfg, "intermediate_size")
    linears = attention_projections(h, base["num_heads"], base["num_kv_heads"], base["head_dim"])
    linears += gated_mlp(h, inter, per_expert=True)
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears), rotary_dim=base["head_dim"],
                     num_experts=config_value(cfg, "num_local_experts"), experts_per_token=config_value(cfg, "num_experts_per_tok"),
                     sliding_window=sliding_window_of(cfg))


def _qwen_router(cfg: Config) -> dict:
    """Qwen-MoE and OLMoE routers renormalise the top-k weights only when `norm_topk_prob` (default
    false) and cast them to the router logits' dtype."""
    return dict(router_norm_topk=bool(cfg.get("norm_topk_prob", False)), router_weights_fp32=False)


def parse_qwen2_moe(cfg, name):
    base = common_fields(cfg, name)
    h = base["hidden_size"]
    if cfg.get("mlp_only_layers") or cfg.get("decoder_sparse_step", 1) != 1:
        raise InvalidConfigError(f"{name}: qwen2_moe with dense layers (mlp_only_layers/decoder_sparse_step) "
                                 "is not supported; use a config where every layer is sparse")
    inter, shared = config_value(cfg, "moe_intermediate_size"), cfg.get("shared_expert_intermediate_size", 0)
    linears = attention_projections(h, base["num_heads"], base["num_kv_heads"], base["head_dim"], qkv_bias=True)
    linears += gated_mlp(h, inter, per_expert=True)
    if shared:
        linears += [projection(f"shared_{lin.name}", lin.in_features, lin.out_features, False, lin.split, {lin.name})
                    for lin in gated_mlp(h, shared)]
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears), rotary_dim=base["head_dim"],
                     num_experts=config_value(cfg, "num_experts"), experts_per_token=config_value(cfg, "num_experts_per_tok"),
                     shared_expert_size=shared, **_qwen_router(cfg))


def _refuse_dense_layers(cfg: Config, name: str) -> None:
    if cfg.get("mlp_only_layers") or cfg.get("decoder_sparse_step", 1) != 1:
        raise InvalidConfigError(f"{name}: {cfg['model_type']} with dense layers (mlp_only_layers/decoder_sparse_step) "
                                 "is not supported; use a config where every layer is sparse")


def _experts(cfg: Config) -> int:
    """Routed experts per layer; transformers maps `num_experts` and `num_local_experts` onto each other for
    Qwen3-MoE and OLMoE (not for Qwen2-MoE or PhiMoE), so their configs may spell it either way."""
    return config_value(cfg, "num_experts", "num_local_experts")


def parse_qwen3_moe(cfg, name):
    """Qwen3-MoE: Qwen3 attention (per-head q/k RMSNorm, no bias) and a sparse block of routed experts
    only (no shared expert); the router's top-k weights are renormalised when `norm_topk_prob`."""
    _refuse_dense_layers(cfg, name)
    base = common_fields(cfg, name)
    h, inter = base["hidden_size"], config_value(cfg, "moe_intermediate_size")
    bias = cfg.get("attention_bias", False)
    linears = attention_projections(h, base["num_heads"], base["num_kv_heads"], base["head_dim"], qkv_bias=bias, o_bias=bias)
    linears += gated_mlp(h, inter, per_expert=True)
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears), rotary_dim=base["head_dim"], qk_norm=True,
                     num_experts=_experts(cfg), experts_per_token=config_value(cfg, "num_experts_per_tok"), **_qwen_router(cfg),
                     sliding_window=int(cfg.get("sliding_window") or 0) if cfg.get("use_sliding_window") else 0,
                     attention_dropout=cfg.get("attention_dropout", 0.0))


def parse_olmoe(cfg, name):
    """OLMoE: RMSNorm on q and k over the whole projection (hidden and kv-heads x head_dim wide, not per
    head), 64 routed experts with top-k weights left unnormalised by default (`norm_topk_prob`)."""
    if cfg.get("clip_qkv") is not None:
        raise InvalidConfigError(f"{name}: olmoe with clip_qkv (in-place clamping of q, k, v) is not supported; "
                                 "use a config with clip_qkv null")
    base = common_fields(cfg, name)
    h, inter = base["hidden_size"], config_value(cfg, "intermediate_size")
    base["head_dim"] = h // base["num_heads"]  # OLMoE sizes its q/k norms from hidden / heads
    bias = cfg.get("attention_bias", False)
    linears = attention_projections(h, base["num_heads"], base["num_kv_heads"], base["head_dim"], qkv_bias=bias, o_bias=bias)
    linears += gated_mlp(h, inter, per_expert=True)
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears), rotary_dim=base["head_dim"],
                     qk_norm=True, qk_norm_full_width=True, num_experts=_experts(cfg),
                     experts_per_token=config_value(cfg, "num_experts_per_tok"), **_qwen_router(cfg),
                     attention_dropout=cfg.get("attention_dropout", 0.0))


def parse_phimoe(cfg, name):
    """PhiMoE (Phi-3.5-MoE): LayerNorms with bias, attention and LM-head biases, and top-2 experts
    picked by sparsemixer (which always picks two), with jitter noise on the router input."""
    base = common_fields(cfg, name)
    h, inter = base["hidden_size"], config_value(cfg, "intermediate_size")
    if config_value(cfg, "num_experts_per_tok", default=2) != 2:
        raise InvalidConfigError(f"{name}: phimoe's sparsemixer routes every token to 2 experts; "
                                 "set num_experts_per_tok to 2")
    bias = cfg.get("attention_bias", False)
    linears = attention_projections(h, base["num_heads"], base["num_kv_heads"], base["head_dim"], qkv_bias=bias, o_bias=bias)
    linears += gated_mlp(h, inter, per_expert=True)
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears), rotary_dim=base["head_dim"],
                     norm=Norm.LAYER, norm_bias=True, lm_head_bias=bool(cfg.get("lm_head_bias", False)),
                     num_experts=config_value(cfg, "num_local_experts"), experts_per_token=2, router=Router.SPARSEMIXER,
                     router_input_jitter=bool(cfg.get("input_jitter_noise")),
                     sliding_window=int(cfg.get("sliding_window") or 0),
                     attention_dropout=cfg.get("attention_dropout", 0.0))

"""Hugging Face config.json -> ModelArch, one parser per model_type, registered in a dict.

Each parser states the layer's projections as HF builds them, so parameter counts, LoRA targets
and tensor-parallel shards follow the real module tree.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from frenzy.core.errors import InvalidConfigError
from frenzy.core.generic import generic_arch
from frenzy.core.model import Linear, ModelArch, Norm, Positions, Router, TpSplit

Config = dict[str, Any]
COL, ROW = TpSplit.COLUMN, TpSplit.ROW


def _lin(name, fan_in, fan_out, bias, split, targets=None, per_expert=False) -> Linear:
    return Linear(
        name=name,
        in_features=fan_in,
        out_features=fan_out,
        bias=bias,
        split=split,
        targets=frozenset(targets or {name}),
        per_expert=per_expert,
    )


def _attention(h, heads, kv_heads, head_dim, qkv_bias=False, o_bias=False, fused=False) -> list[Linear]:
    q_out, kv_out = heads * head_dim, kv_heads * head_dim
    if fused:
        qkv = _lin("qkv", h, q_out + 2 * kv_out, qkv_bias, COL, {"q", "k", "v"})
        return [qkv, _lin("o", q_out, h, o_bias, ROW)]
    return [
        _lin("q", h, q_out, qkv_bias, COL),
        _lin("k", h, kv_out, qkv_bias, COL),
        _lin("v", h, kv_out, qkv_bias, COL),
        _lin("o", q_out, h, o_bias, ROW),
    ]


def _gated_mlp(h, inter, bias=False, per_expert=False, fused=False) -> list[Linear]:
    if fused:
        up = [_lin("gate_up", h, 2 * inter, bias, COL, {"gate", "up"}, per_expert)]
    else:
        up = [_lin("gate", h, inter, bias, COL, None, per_expert), _lin("up", h, inter, bias, COL, None, per_expert)]
    return [*up, _lin("down", inter, h, bias, ROW, None, per_expert)]


def _plain_mlp(h, inter, bias=True) -> list[Linear]:
    return [_lin("up", h, inter, bias, COL), _lin("down", inter, h, bias, ROW)]


def _get(cfg: Config, *names, default=None):
    for name in names:
        if cfg.get(name) is not None:
            return cfg[name]
    if default is not None:
        return default
    raise InvalidConfigError(f"config.json lacks '{names[0]}' (model_type {cfg.get('model_type')}); add it")


def _common(cfg: Config, name: str, *, layers_key="num_hidden_layers", heads_key="num_attention_heads",
            hidden_key="hidden_size") -> dict:
    h = _get(cfg, hidden_key)
    heads = _get(cfg, heads_key)
    kv = cfg.get("num_key_value_heads") or heads
    return dict(
        name=name,
        family=cfg["model_type"],
        vocab_size=_get(cfg, "vocab_size"),
        hidden_size=h,
        num_layers=_get(cfg, layers_key),
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=cfg.get("head_dim") or h // heads,
        max_position_embeddings=_get(cfg, "max_position_embeddings", "n_positions", "seq_length", default=2048),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
    )


def _llama_like(cfg: Config, name: str, *, qkv_bias=None, tie_default=False, **overrides) -> ModelArch:
    base = _common(cfg, name)
    base["tie_word_embeddings"] = bool(cfg.get("tie_word_embeddings", tie_default))
    inter = _get(cfg, "intermediate_size")
    bias = cfg.get("attention_bias", False) if qkv_bias is None else qkv_bias
    linears = _attention(base["hidden_size"], base["num_heads"], base["num_kv_heads"], base["head_dim"],
                         qkv_bias=bias, o_bias=cfg.get("attention_bias", False) and qkv_bias is None)
    linears += _gated_mlp(base["hidden_size"], inter, bias=cfg.get("mlp_bias", False))
    args = dict(base, intermediate_size=inter, linears=tuple(linears), rotary_dim=base["head_dim"],
                sliding_window=_sliding_window(cfg),
                activation=cfg.get("hidden_act", "silu"), attention_dropout=cfg.get("attention_dropout", 0.0))
    args.update(overrides)
    return ModelArch(**args)


def _sliding_window(cfg: Config) -> int:
    if not cfg.get("use_sliding_window", True):  # Qwen2 configs carry a window they do not use
        return 0
    return int(cfg.get("sliding_window") or 0)


def parse_llama(cfg, name):
    return _llama_like(cfg, name)


def parse_qwen2(cfg, name):
    return _llama_like(cfg, name, qkv_bias=True)


def parse_qwen3(cfg, name):
    return _llama_like(cfg, name, qk_norm=True)


def parse_gemma(cfg, name):
    return _llama_like(cfg, name, tie_default=True, activation=cfg.get("hidden_activation") or "gelu_pytorch_tanh",
                       norm_fp32_output=True)


def parse_gemma2(cfg, name):
    softcap = bool(cfg.get("attn_logit_softcapping"))
    return _llama_like(cfg, name, tie_default=True, norms_per_layer=4,
                       activation=cfg.get("hidden_activation") or "gelu_pytorch_tanh",
                       logit_softcap=cfg.get("final_logit_softcapping") or 0.0, norm_fp32_output=True,
                       attn_softcap=softcap, sdpa_supported=not softcap)


def parse_phi3(cfg, name):
    base = _common(cfg, name)
    h, inter = base["hidden_size"], _get(cfg, "intermediate_size")
    linears = _attention(h, base["num_heads"], base["num_kv_heads"], base["head_dim"], fused=True)
    linears += _gated_mlp(h, inter, fused=True)
    rotary = int(base["head_dim"] * cfg.get("partial_rotary_factor", 1.0))
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears), rotary_dim=rotary,
                     hidden_dropout=cfg.get("resid_pdrop", 0.0), attention_dropout=cfg.get("attention_dropout", 0.0),
                     rope_concat=True, sliding_window=_sliding_window(cfg))


def parse_mixtral(cfg, name):
    base = _common(cfg, name)
    h, inter = base["hidden_size"], _get(cfg, "intermediate_size")
    linears = _attention(h, base["num_heads"], base["num_kv_heads"], base["head_dim"])
    linears += _gated_mlp(h, inter, per_expert=True)
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears), rotary_dim=base["head_dim"],
                     num_experts=_get(cfg, "num_local_experts"), experts_per_token=_get(cfg, "num_experts_per_tok"),
                     sliding_window=_sliding_window(cfg))


def _qwen_router(cfg: Config) -> dict:
    """Qwen-MoE and OLMoE routers renormalise the top-k weights only when `norm_topk_prob` (default
    false) and cast them to the router logits' dtype."""
    return dict(router_norm_topk=bool(cfg.get("norm_topk_prob", False)), router_weights_fp32=False)


def parse_qwen2_moe(cfg, name):
    base = _common(cfg, name)
    h = base["hidden_size"]
    if cfg.get("mlp_only_layers") or cfg.get("decoder_sparse_step", 1) != 1:
        raise InvalidConfigError(f"{name}: qwen2_moe with dense layers (mlp_only_layers/decoder_sparse_step) "
                                 "is not supported; use a config where every layer is sparse")
    inter, shared = _get(cfg, "moe_intermediate_size"), cfg.get("shared_expert_intermediate_size", 0)
    linears = _attention(h, base["num_heads"], base["num_kv_heads"], base["head_dim"], qkv_bias=True)
    linears += _gated_mlp(h, inter, per_expert=True)
    if shared:
        linears += [_lin(f"shared_{lin.name}", lin.in_features, lin.out_features, False, lin.split, {lin.name})
                    for lin in _gated_mlp(h, shared)]
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears), rotary_dim=base["head_dim"],
                     num_experts=_get(cfg, "num_experts"), experts_per_token=_get(cfg, "num_experts_per_tok"),
                     shared_expert_size=shared, **_qwen_router(cfg))


def _refuse_dense_layers(cfg: Config, name: str) -> None:
    if cfg.get("mlp_only_layers") or cfg.get("decoder_sparse_step", 1) != 1:
        raise InvalidConfigError(f"{name}: {cfg['model_type']} with dense layers (mlp_only_layers/decoder_sparse_step) "
                                 "is not supported; use a config where every layer is sparse")


def _experts(cfg: Config) -> int:
    """Routed experts per layer; transformers maps `num_experts` and `num_local_experts` onto each other for
    Qwen3-MoE and OLMoE (not for Qwen2-MoE or PhiMoE), so their configs may spell it either way."""
    return _get(cfg, "num_experts", "num_local_experts")


def parse_qwen3_moe(cfg, name):
    """Qwen3-MoE: Qwen3 attention (per-head q/k RMSNorm, no bias) and a sparse block of routed experts
    only (no shared expert); the router's top-k weights are renormalised when `norm_topk_prob`."""
    _refuse_dense_layers(cfg, name)
    base = _common(cfg, name)
    h, inter = base["hidden_size"], _get(cfg, "moe_intermediate_size")
    bias = cfg.get("attention_bias", False)
    linears = _attention(h, base["num_heads"], base["num_kv_heads"], base["head_dim"], qkv_bias=bias, o_bias=bias)
    linears += _gated_mlp(h, inter, per_expert=True)
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears), rotary_dim=base["head_dim"], qk_norm=True,
                     num_experts=_experts(cfg), experts_per_token=_get(cfg, "num_experts_per_tok"), **_qwen_router(cfg),
                     sliding_window=int(cfg.get("sliding_window") or 0) if cfg.get("use_sliding_window") else 0,
                     attention_dropout=cfg.get("attention_dropout", 0.0))


def parse_olmoe(cfg, name):
    """OLMoE: RMSNorm on q and k over the whole projection (hidden and kv-heads x head_dim wide, not per
    head), 64 routed experts with top-k weights left unnormalised by default (`norm_topk_prob`)."""
    if cfg.get("clip_qkv") is not None:
        raise InvalidConfigError(f"{name}: olmoe with clip_qkv (in-place clamping of q, k, v) is not supported; "
                                 "use a config with clip_qkv null")
    base = _common(cfg, name)
    h, inter = base["hidden_size"], _get(cfg, "intermediate_size")
    base["head_dim"] = h // base["num_heads"]  # OLMoE sizes its q/k norms from hidden / heads
    bias = cfg.get("attention_bias", False)
    linears = _attention(h, base["num_heads"], base["num_kv_heads"], base["head_dim"], qkv_bias=bias, o_bias=bias)
    linears += _gated_mlp(h, inter, per_expert=True)
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears), rotary_dim=base["head_dim"],
                     qk_norm=True, qk_norm_full_width=True, num_experts=_experts(cfg),
                     experts_per_token=_get(cfg, "num_experts_per_tok"), **_qwen_router(cfg),
                     attention_dropout=cfg.get("attention_dropout", 0.0))


def parse_phimoe(cfg, name):
    """PhiMoE (Phi-3.5-MoE): LayerNorms with bias, attention and LM-head biases, and top-2 experts
    picked by sparsemixer (which always picks two), with jitter noise on the router input."""
    base = _common(cfg, name)
    h, inter = base["hidden_size"], _get(cfg, "intermediate_size")
    if _get(cfg, "num_experts_per_tok", default=2) != 2:
        raise InvalidConfigError(f"{name}: phimoe's sparsemixer routes every token to 2 experts; "
                                 "set num_experts_per_tok to 2")
    bias = cfg.get("attention_bias", False)
    linears = _attention(h, base["num_heads"], base["num_kv_heads"], base["head_dim"], qkv_bias=bias, o_bias=bias)
    linears += _gated_mlp(h, inter, per_expert=True)
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears), rotary_dim=base["head_dim"],
                     norm=Norm.LAYER, norm_bias=True, lm_head_bias=bool(cfg.get("lm_head_bias", False)),
                     num_experts=_get(cfg, "num_local_experts"), experts_per_token=2, router=Router.SPARSEMIXER,
                     router_input_jitter=bool(cfg.get("input_jitter_noise")),
                     sliding_window=int(cfg.get("sliding_window") or 0),
                     attention_dropout=cfg.get("attention_dropout", 0.0))


def parse_qwen(cfg, name):
    """Qwen v1 (QWenLMHeadModel): `intermediate_size` is twice the width of w1 and w2."""
    base = _common(cfg, name)
    h, inter = base["hidden_size"], _get(cfg, "intermediate_size") // 2
    linears = _attention(h, base["num_heads"], base["num_heads"], base["head_dim"], qkv_bias=True, fused=True)
    linears += _gated_mlp(h, inter)
    # seq_length is the pretraining length; max_position_embeddings is what dynamic NTK scaling serves
    # (Qwen-14B: 2048 and 8192). The larger is the limit, the smaller only a reason to warn.
    trained = cfg.get("seq_length") or base["max_position_embeddings"]
    base["max_position_embeddings"] = max(trained, base["max_position_embeddings"])
    rotary = int(base["head_dim"] * cfg.get("rotary_pct", 1.0))
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears), rotary_dim=rotary,
                     trained_seq_len=trained if trained < base["max_position_embeddings"] else 0,
                     attention_dropout=cfg.get("attn_dropout_prob", 0.0), hidden_dropout=cfg.get("hidden_dropout", 0.0))


def parse_gpt2(cfg, name):
    base = _common(cfg, name, layers_key="n_layer", heads_key="n_head", hidden_key="n_embd")
    h = base["hidden_size"]
    inter = cfg.get("n_inner") or 4 * h
    base["tie_word_embeddings"] = cfg.get("tie_word_embeddings", True)
    linears = _attention(h, base["num_heads"], base["num_heads"], base["head_dim"], True, True, fused=True)
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears + _plain_mlp(h, inter)),
                     norm=Norm.LAYER, norm_bias=True, mlp_gated=False, activation=cfg.get("activation_function", "gelu_new"),
                     positions=Positions.LEARNED, learned_position_rows=base["max_position_embeddings"],
                     attention_dropout=cfg.get("attn_pdrop", 0.1), hidden_dropout=cfg.get("resid_pdrop", 0.1),
                     eager_softmax_fp32=False)


def parse_gpt_neo(cfg, name):
    base = _common(cfg, name, layers_key="num_layers", heads_key="num_heads")
    h = base["hidden_size"]
    inter = cfg.get("intermediate_size") or 4 * h
    base["tie_word_embeddings"] = cfg.get("tie_word_embeddings", True)
    linears = _attention(h, base["num_heads"], base["num_heads"], base["head_dim"], False, True)
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears + _plain_mlp(h, inter)),
                     norm=Norm.LAYER, norm_bias=True, mlp_gated=False, activation=cfg.get("activation_function", "gelu_new"),
                     positions=Positions.LEARNED, learned_position_rows=base["max_position_embeddings"],
                     attention_dropout=cfg.get("attention_dropout", 0.0), hidden_dropout=cfg.get("resid_dropout", 0.0),
                     eager_softmax_fp32=False, sdpa_supported=False, eager_qk_fp32=True,
                     buffer_bytes_per_layer=base["max_position_embeddings"] ** 2)


def parse_gptj(cfg, name):
    base = _common(cfg, name, layers_key="n_layer", heads_key="n_head", hidden_key="n_embd")
    h = base["hidden_size"]
    inter = cfg.get("n_inner") or 4 * h
    linears = _attention(h, base["num_heads"], base["num_heads"], base["head_dim"])
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears + _plain_mlp(h, inter)),
                     norm=Norm.LAYER, norm_bias=True, norms_per_layer=1, mlp_gated=False, parallel_residual=True,
                     activation=cfg.get("activation_function", "gelu_new"), rotary_dim=cfg.get("rotary_dim") or base["head_dim"],
                     lm_head_bias=True, attention_dropout=cfg.get("attn_pdrop", 0.0), hidden_dropout=cfg.get("resid_pdrop", 0.0),
                     sdpa_supported=False, eager_qk_fp32=True)


def parse_gpt_neox(cfg, name):
    base = _common(cfg, name)
    h, inter = base["hidden_size"], _get(cfg, "intermediate_size")
    bias = cfg.get("attention_bias", True)
    linears = _attention(h, base["num_heads"], base["num_heads"], base["head_dim"], bias, bias, fused=True)
    rotary = int(base["head_dim"] * cfg.get("rotary_pct", cfg.get("partial_rotary_factor", 1.0)))
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears + _plain_mlp(h, inter)),
                     norm=Norm.LAYER, norm_bias=True, mlp_gated=False, activation=cfg.get("hidden_act", "gelu"),
                     parallel_residual=cfg.get("use_parallel_residual", True), rotary_dim=rotary,
                     attention_dropout=cfg.get("attention_dropout", 0.0), hidden_dropout=cfg.get("hidden_dropout", 0.0))


def parse_opt(cfg, name):
    base = _common(cfg, name)
    h, inter = base["hidden_size"], _get(cfg, "ffn_dim")
    base["tie_word_embeddings"] = cfg.get("tie_word_embeddings", True)
    bias = cfg.get("enable_bias", True)
    proj = cfg.get("word_embed_proj_dim", h)
    linears = _attention(h, base["num_heads"], base["num_heads"], base["head_dim"], bias, bias)
    final_norm = cfg.get("do_layer_norm_before", True) and not cfg.get("_remove_final_layer_norm", False)
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears + _plain_mlp(h, inter, bias)),
                     norm=Norm.LAYER, norm_bias=cfg.get("layer_norm_elementwise_affine", True), mlp_gated=False,
                     activation=cfg.get("activation_function", "relu"), positions=Positions.LEARNED,
                     learned_position_rows=base["max_position_embeddings"] + 2,  # OPT offsets positions by 2
                     final_norm=final_norm, embed_proj_dim=proj if proj != h else 0,
                     attention_dropout=cfg.get("attention_dropout", 0.0), hidden_dropout=cfg.get("dropout", 0.1))


def parse_bloom(cfg, name):
    base = _common(cfg, name, layers_key="n_layer", heads_key="n_head")
    h = base["hidden_size"]
    base["tie_word_embeddings"] = cfg.get("tie_word_embeddings", True)
    linears = _attention(h, base["num_heads"], base["num_heads"], base["head_dim"], True, True, fused=True)
    return ModelArch(**base, intermediate_size=4 * h, linears=tuple(linears + _plain_mlp(h, 4 * h)),
                     norm=Norm.LAYER, norm_bias=True, mlp_gated=False, activation="gelu", positions=Positions.ALIBI,
                     embedding_norm=True, attention_dropout=cfg.get("attention_dropout", 0.0),
                     hidden_dropout=cfg.get("hidden_dropout", 0.0), sdpa_supported=False)


def parse_phi(cfg, name):
    base = _common(cfg, name)
    h, inter = base["hidden_size"], _get(cfg, "intermediate_size")
    linears = _attention(h, base["num_heads"], base["num_kv_heads"], base["head_dim"], True, True)
    rotary = int(base["head_dim"] * cfg.get("partial_rotary_factor", 0.5))
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears + _plain_mlp(h, inter)),
                     norm=Norm.LAYER, norm_bias=True, norms_per_layer=1, mlp_gated=False, parallel_residual=True,
                     activation=cfg.get("hidden_act", "gelu_new"), rotary_dim=rotary, lm_head_bias=True,
                     attention_dropout=cfg.get("attention_dropout", 0.0), hidden_dropout=cfg.get("resid_pdrop", 0.0))


def parse_stablelm(cfg, name):
    base = _common(cfg, name)
    h, inter = base["hidden_size"], _get(cfg, "intermediate_size")
    linears = _attention(h, base["num_heads"], base["num_kv_heads"], base["head_dim"], cfg.get("use_qkv_bias", False))
    if cfg.get("qk_layernorm"):
        raise InvalidConfigError(f"{name}: stablelm with qk_layernorm is not supported yet")
    rotary = int(base["head_dim"] * cfg.get("partial_rotary_factor", 0.25))
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears + _gated_mlp(h, inter)),
                     norm=Norm.LAYER, norm_bias=True, norms_per_layer=1 if cfg.get("use_parallel_residual") else 2,
                     parallel_residual=bool(cfg.get("use_parallel_residual")), rotary_dim=rotary,
                     activation=cfg.get("hidden_act", "silu"), attention_dropout=cfg.get("attention_dropout", 0.0),
                     hidden_dropout=cfg.get("hidden_dropout", 0.0))


def parse_falcon(cfg, name):
    base = _common(cfg, name, layers_key="num_hidden_layers")
    h = base["hidden_size"]
    if cfg.get("new_decoder_architecture"):
        kv = cfg.get("num_kv_heads") or base["num_heads"]
        norms = 2
    else:
        kv = 1 if cfg.get("multi_query", True) else base["num_heads"]
        norms = 1 if cfg.get("parallel_attn", True) else 2
    if cfg.get("alibi"):
        raise InvalidConfigError(f"{name}: falcon with alibi is not supported; use a rotary falcon config")
    base["num_kv_heads"] = kv
    bias = cfg.get("bias", False)
    inter = cfg.get("ffn_hidden_size") or 4 * h
    linears = _attention(h, base["num_heads"], kv, base["head_dim"], bias, bias, fused=True)
    base["tie_word_embeddings"] = cfg.get("tie_word_embeddings", True)
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears + _plain_mlp(h, inter, bias)),
                     norm=Norm.LAYER, norm_bias=True, norms_per_layer=norms, mlp_gated=False, activation="gelu",
                     parallel_residual=cfg.get("parallel_attn", True), rotary_dim=base["head_dim"],
                     attention_dropout=cfg.get("attention_dropout", 0.0), hidden_dropout=cfg.get("hidden_dropout", 0.0))


def parse_starcoder2(cfg, name):
    """StarCoder2: biased LayerNorms, a plain gelu MLP (c_fc, c_proj), dropout after both sublayers."""
    base = _common(cfg, name)
    base["tie_word_embeddings"] = bool(cfg.get("tie_word_embeddings", True))
    h, inter = base["hidden_size"], _get(cfg, "intermediate_size")
    bias = cfg.get("use_bias", True)
    linears = _attention(h, base["num_heads"], base["num_kv_heads"], base["head_dim"], bias, bias)
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears + _plain_mlp(h, inter, bias)),
                     norm=Norm.LAYER, norm_bias=True, mlp_gated=False,
                     activation=cfg.get("hidden_act", "gelu_pytorch_tanh"), rotary_dim=base["head_dim"],
                     sliding_window=_sliding_window(cfg), attention_dropout=cfg.get("attention_dropout", 0.0),
                     hidden_dropout=cfg.get("residual_dropout", 0.0))


def parse_granite(cfg, name):
    """Granite: Llama with scalar multipliers on the embedding, residual branches, attention and logits
    (a multiplication by a Python scalar saves nothing; the scaled logits replace the unscaled ones)."""
    return _llama_like(cfg, name, embedding_scaled=cfg.get("embedding_multiplier", 1.0) != 1.0)


def parse_smollm3(cfg, name):
    """SmolLM3: Llama whose `no_rope_layers` skip rotary embeddings (same saved tensors either way)."""
    return _llama_like(cfg, name, tie_default=True)


def parse_olmo2(cfg, name):
    """OLMo 2: norms after attention and after the MLP (none before), RMSNorm on the full q and k
    projection widths; its RMSNorm scales in fp32 before casting back."""
    return _llama_like(cfg, name, qk_norm=True, qk_norm_full_width=True, post_sublayer_norms=2,
                       norm_fp32_output=True)


def parse_glm4(cfg, name):
    """GLM-4 (0414): fused gate_up_proj, norms before and after each sublayer, partial rotary, qkv bias."""
    base = _common(cfg, name)
    h, inter = base["hidden_size"], _get(cfg, "intermediate_size")
    linears = _attention(h, base["num_heads"], base["num_kv_heads"], base["head_dim"],
                         qkv_bias=cfg.get("attention_bias", True))
    linears += _gated_mlp(h, inter, fused=True)
    rotary = int(base["head_dim"] * cfg.get("partial_rotary_factor", 0.5))
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears), rotary_dim=rotary, norms_per_layer=4,
                     post_sublayer_norms=2, activation=cfg.get("hidden_act", "silu"),
                     attention_dropout=cfg.get("attention_dropout", 0.0))


def _layer_pattern_globals(cfg: Config, default_pattern: int) -> int:
    """Layers of an interleaved sliding/global pattern that attend globally (`layer_types`, or every
    `sliding_window_pattern`-th layer as transformers derives it)."""
    layers = _get(cfg, "num_hidden_layers")
    types = cfg.get("layer_types")
    if types is None:
        pattern = cfg.get("sliding_window_pattern") or default_pattern
        types = ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(layers)]
    return sum(t != "sliding_attention" for t in types[:layers])


# Gemma3TextConfig's defaults: the multimodal configs on the Hub state only what differs from them.
_GEMMA3_TEXT_DEFAULTS = dict(vocab_size=262_208, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26,
                             num_attention_heads=8, num_key_value_heads=4, head_dim=256,
                             max_position_embeddings=131_072, sliding_window=4096, tie_word_embeddings=True)


def parse_gemma3_text(cfg, name):
    """Gemma 3: Gemma 2's four norms, per-head q/k RMSNorm, interleaved sliding and global layers, no
    attention soft-capping. Its embedding module scales its own output, so nothing is kept for that."""
    cfg = {**_GEMMA3_TEXT_DEFAULTS, **{k: v for k, v in cfg.items() if v is not None}}
    softcap = bool(cfg.get("attn_logit_softcapping"))
    window = int(cfg.get("sliding_window") or 0)
    return _llama_like(cfg, name, tie_default=True, norms_per_layer=4, post_sublayer_norms=2, qk_norm=True,
                       activation=cfg.get("hidden_activation") or "gelu_pytorch_tanh",
                       logit_softcap=cfg.get("final_logit_softcapping") or 0.0, norm_fp32_output=True,
                       attn_softcap=softcap, sdpa_supported=not softcap, sliding_window=window,
                       global_layers=_layer_pattern_globals(cfg, 6) if window else 0)


def parse_gemma3(cfg, name):
    """Gemma 3 multimodal config: the causal language model on its `text_config` (the vision tower
    is not part of the causal-LM training step)."""
    text = dict(cfg.get("text_config") or {})
    text.setdefault("tie_word_embeddings", cfg.get("tie_word_embeddings", True))
    text["model_type"] = "gemma3_text"
    return parse_gemma3_text(text, name)


def _cohere_like(cfg: Config, name: str, **overrides) -> ModelArch:
    base = _common(cfg, name)
    base["tie_word_embeddings"] = bool(cfg.get("tie_word_embeddings", True))
    h, inter = base["hidden_size"], _get(cfg, "intermediate_size")
    bias = cfg.get("attention_bias", False)
    linears = _attention(h, base["num_heads"], base["num_kv_heads"], base["head_dim"], bias, bias)
    linears += _gated_mlp(h, inter)
    args = dict(base, intermediate_size=inter, linears=tuple(linears), rotary_dim=base["head_dim"],
                norm=Norm.LAYER_FP32, norms_per_layer=1, parallel_residual=True,
                activation=cfg.get("hidden_act", "silu"), attention_dropout=cfg.get("attention_dropout", 0.0))
    args.update(overrides)
    return ModelArch(**args)


def parse_cohere(cfg, name):
    """Cohere (Command R, Aya): one bias-free LayerNorm feeding attention and MLP in parallel,
    optional per-head LayerNorm on q and k (weights per head), scaled logits, tied embeddings."""
    qk = bool(cfg.get("use_qk_norm"))
    return _cohere_like(cfg, name, qk_norm=qk, qk_norm_full_width=qk)


def parse_cohere2(cfg, name):
    """Cohere 2 (Command R7B): Cohere with interleaved sliding-window layers."""
    window = int(cfg.get("sliding_window") or 0)
    return _cohere_like(cfg, name, sliding_window=window, global_layers=_layer_pattern_globals(cfg, 4) if window else 0)


PARSERS: dict[str, Callable[[Config, str], ModelArch]] = {
    "llama": parse_llama,
    "mistral": parse_llama,
    "mixtral": parse_mixtral,
    "qwen2": parse_qwen2,
    "qwen2_moe": parse_qwen2_moe,
    "qwen3": parse_qwen3,
    "qwen3_moe": parse_qwen3_moe,
    "olmoe": parse_olmoe,
    "phimoe": parse_phimoe,
    "qwen": parse_qwen,
    "gpt2": parse_gpt2,
    "gpt_neox": parse_gpt_neox,
    "gptj": parse_gptj,
    "gpt_neo": parse_gpt_neo,
    "opt": parse_opt,
    "bloom": parse_bloom,
    "phi": parse_phi,
    "phi3": parse_phi3,
    "stablelm": parse_stablelm,
    "gemma": parse_gemma,
    "gemma2": parse_gemma2,
    "falcon": parse_falcon,
    "starcoder2": parse_starcoder2,
    "granite": parse_granite,
    "smollm3": parse_smollm3,
    "olmo2": parse_olmo2,
    "glm4": parse_glm4,
    "gemma3_text": parse_gemma3_text,
    "gemma3": parse_gemma3,
    "cohere": parse_cohere,
    "cohere2": parse_cohere2,
}


def arch_from_config(cfg: Config, name: str, profiled: bool = False) -> ModelArch:
    """The ModelArch of a config: from the family's parser, or (no parser, or `profiled`) from the
    model's module tree with activations profiled by the tracer (frenzy.core.generic)."""
    from frenzy.core.scope import require_causal_lm

    require_causal_lm(cfg, name, supported=PARSERS)  # encoder, encoder-decoder and SSM models: why not, and what instead
    if profiled:
        return generic_arch(cfg, name)
    model_type = cfg.get("model_type")
    if model_type is None and "QWenLMHeadModel" in cfg.get("architectures", []):
        model_type = cfg["model_type"] = "qwen"
    if model_type not in PARSERS:
        # No formula: the family is described by its real module tree and a traced profile.
        return generic_arch(cfg, name)
    try:
        return PARSERS[model_type](cfg, name)
    except (TypeError, ZeroDivisionError, ValueError) as exc:
        if isinstance(exc, InvalidConfigError):
            raise
        raise InvalidConfigError(f"{name}: config.json is inconsistent ({exc}); check its sizes") from exc


def load_config(name_or_path: str) -> tuple[Config, str]:
    """A catalog name (repo id or alias), a repo id in the local Hugging Face cache, a post-training
    variant of a catalog model (`...-Instruct`: its base's config), or a path to a config.json (or a
    folder holding one) -> (the raw HF config dict, the model's display name)."""
    from frenzy.core import catalog, hf_cache
    from frenzy.core.errors import UnknownNameError

    path = Path(name_or_path)
    if path.is_dir():
        path = path / "config.json"
    if path.suffix == ".json" or path.exists():
        if not path.exists():
            raise InvalidConfigError(f"config file {path} does not exist; pass a catalog name or a config.json path")
        try:
            cfg = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise InvalidConfigError(f"{path} is not valid JSON ({exc}); pass a Hugging Face config.json") from exc
        if not isinstance(cfg, dict):
            raise InvalidConfigError(f"{path} does not hold a JSON object; pass a Hugging Face config.json")
        return cfg, cfg.get("_name_or_path") or (path.parent.name if path.name == "config.json" else "") or path.stem
    try:
        repo_id = catalog.canonical_model_name(name_or_path, variants=False)
    except UnknownNameError:
        # The model's own downloaded config beats assuming a fine-tune kept its base's architecture.
        typed = name_or_path.strip()
        cached = hf_cache.read_cached_config(typed)
        if cached is not None:
            return cached, typed
        base = catalog.canonical_model_name(typed)  # a post-training variant of a catalog model, or the error
        return catalog.model_config(base), typed
    return catalog.model_config(repo_id), repo_id


def load_model(name_or_path: str, profiled: bool = False) -> ModelArch:
    return arch_from_config(*load_config(name_or_path), profiled=profiled)

"""Parsers of the rotary decoder families with gated MLPs: Llama and its descendants (one parser per
model_type, registered in frenzy.core.hf_config.PARSERS)."""

from __future__ import annotations

from frenzy.core.model import ModelArch, Norm
from frenzy.core.hf_blocks import (Config, attention_projections, common_fields, gated_mlp, config_value,
                                   llama_like, plain_mlp, sliding_window_of)


def parse_llama(cfg, name):
    return llama_like(cfg, name)


def parse_qwen2(cfg, name):
    return llama_like(cfg, name, qkv_bias=True)


def parse_qwen3(cfg, name):
    return llama_like(cfg, name, qk_norm=True)


def parse_gemma(cfg, name):
    return llama_like(cfg, name, tie_default=True, activation=cfg.get("hidden_activation") or "gelu_pytorch_tanh",
                       norm_fp32_output=True)


def parse_gemma2(cfg, name):
    softcap = bool(cfg.get("attn_logit_softcapping"))
    return llama_like(cfg, name, tie_default=True, norms_per_layer=4,
                       activation=cfg.get("hidden_activation") or "gelu_pytorch_tanh",
                       logit_softcap=cfg.get("final_logit_softcapping") or 0.0, norm_fp32_output=True,
                       attn_softcap=softcap, sdpa_supported=not softcap)


def parse_phi3(cfg, name):
    base = common_fields(cfg, name)
    h, inter = base["hidden_size"], config_value(cfg, "intermediate_size")
    linears = attention_projections(h, base["num_heads"], base["num_kv_heads"], base["head_dim"], fused=True)
    linears += gated_mlp(h, inter, fused=True)
    rotary = int(base["head_dim"] * cfg.get("partial_rotary_factor", 1.0))
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears), rotary_dim=rotary,
                     hidden_dropout=cfg.get("resid_pdrop", 0.0), attention_dropout=cfg.get("attention_dropout", 0.0),
                     rope_concat=True, sliding_window=sliding_window_of(cfg))


def parse_qwen(cfg, name):
    """Qwen v1 (QWenLMHeadModel): `intermediate_size` is twice the width of w1 and w2."""
    base = common_fields(cfg, name)
    h, inter = base["hidden_size"], config_value(cfg, "intermediate_size") // 2
    linears = attention_projections(h, base["num_heads"], base["num_heads"], base["head_dim"], qkv_bias=True, fused=True)
    linears += gated_mlp(h, inter)
    # seq_length is the pretraining length; max_position_embeddings is what dynamic NTK scaling serves
    # (Qwen-14B: 2048 and 8192). The larger is the limit, the smaller only a reason to warn.
    trained = cfg.get("seq_length") or base["max_position_embeddings"]
    base["max_position_embeddings"] = max(trained, base["max_position_embeddings"])
    rotary = int(base["head_dim"] * cfg.get("rotary_pct", 1.0))
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears), rotary_dim=rotary,
                     trained_seq_len=trained if trained < base["max_position_embeddings"] else 0,
                     attention_dropout=cfg.get("attn_dropout_prob", 0.0), hidden_dropout=cfg.get("hidden_dropout", 0.0))


def parse_starcoder2(cfg, name):
    """StarCoder2: biased LayerNorms, a plain gelu MLP (c_fc, c_proj), dropout after both sublayers."""
    base = common_fields(cfg, name)
    base["tie_word_embeddings"] = bool(cfg.get("tie_word_embeddings", True))
    h, inter = base["hidden_size"], config_value(cfg, "intermediate_size")
    bias = cfg.get("use_bias", True)
    linears = attention_projections(h, base["num_heads"], base["num_kv_heads"], base["head_dim"], bias, bias)
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears + plain_mlp(h, inter, bias)),
                     norm=Norm.LAYER, norm_bias=True, mlp_gated=False,
                     activation=cfg.get("hidden_act", "gelu_pytorch_tanh"), rotary_dim=base["head_dim"],
                     sliding_window=sliding_window_of(cfg), attention_dropout=cfg.get("attention_dropout", 0.0),
                     hidden_dropout=cfg.get("residual_dropout", 0.0))


def parse_granite(cfg, name):
    """Granite: Llama with scalar multipliers on the embedding, residual branches, attention and logits
    (a multiplication by a Python scalar saves nothing; the scaled logits replace the unscaled ones)."""
    return llama_like(cfg, name, embedding_scaled=cfg.get("embedding_multiplier", 1.0) != 1.0)


def parse_smollm3(cfg, name):
    """SmolLM3: Llama whose `no_rope_layers` skip rotary embeddings (same saved tensors either way)."""
    return llama_like(cfg, name, tie_default=True)


def parse_olmo2(cfg, name):
    """OLMo 2: norms after attention and after the MLP (none before), RMSNorm on the full q and k
    projection widths; its RMSNorm scales in fp32 before casting back."""
    return llama_like(cfg, name, qk_norm=True, qk_norm_full_width=True, post_sublayer_norms=2,
                       norm_fp32_output=True)


def parse_glm4(cfg, name):
    """GLM-4 (0414): fused gate_up_proj, norms before and after each sublayer, partial rotary, qkv bias."""
    base = common_fields(cfg, name)
    h, inter = base["hidden_size"], config_value(cfg, "intermediate_size")
    linears = attention_projections(h, base["num_heads"], base["num_kv_heads"], base["head_dim"],
                         qkv_bias=cfg.get("attention_bias", True))
    linears += gated_mlp(h, inter, fused=True)
    rotary = int(base["head_dim"] * cfg.get("partial_rotary_factor", 0.5))
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears), rotary_dim=rotary, norms_per_layer=4,
                     post_sublayer_norms=2, activation=cfg.get("hidden_act", "silu"),
                     attention_dropout=cfg.get("attention_dropout", 0.0))


def _layer_pattern_globals(cfg: Config, default_pattern: int) -> int:
    """Layers of an interleaved sliding/global pattern that attend globally (`layer_types`, or every
    `sliding_window_pattern`-th layer as transformers derives it)."""
    layers = config_value(cfg, "num_hidden_layers")
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
    return llama_like(cfg, name, tie_default=True, norms_per_layer=4, post_sublayer_norms=2, qk_norm=True,
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
    base = common_fields(cfg, name)
    base["tie_word_embeddings"] = bool(cfg.get("tie_word_embeddings", True))
    h, inter = base["hidden_size"], config_value(cfg, "intermediate_size")
    bias = cfg.get("attention_bias", False)
    linears = attention_projections(h, base["num_heads"], base["num_kv_heads"], base["head_dim"], bias, bias)
    linears += gated_mlp(h, inter)
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

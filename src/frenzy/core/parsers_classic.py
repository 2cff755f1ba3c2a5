"""Parsers of the LayerNorm-era families (GPT-2, GPT-Neo/J/NeoX, OPT, BLOOM, Phi, StableLM, Falcon)."""

from __future__ import annotations

from frenzy.core.errors import InvalidConfigError
from frenzy.core.model import ModelArch, Norm, Positions
from frenzy.core.hf_blocks import attention_projections, common_fields, gated_mlp, config_value, plain_mlp


def parse_gpt2(cfg, name):
    base = common_fields(cfg, name, layers_key="n_layer", heads_key="n_head", hidden_key="n_embd")
    h = base["hidden_size"]
    inter = cfg.get("n_inner") or 4 * h
    base["tie_word_embeddings"] = cfg.get("tie_word_embeddings", True)
    linears = attention_projections(h, base["num_heads"], base["num_heads"], base["head_dim"], True, True, fused=True)
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears + plain_mlp(h, inter)),
                     norm=Norm.LAYER, norm_bias=True, mlp_gated=False, activation=cfg.get("activation_function", "gelu_new"),
                     positions=Positions.LEARNED, learned_position_rows=base["max_position_embeddings"],
                     attention_dropout=cfg.get("attn_pdrop", 0.1), hidden_dropout=cfg.get("resid_pdrop", 0.1),
                     eager_softmax_fp32=False)


def parse_gpt_neo(cfg, name):
    base = common_fields(cfg, name, layers_key="num_layers", heads_key="num_heads")
    h = base["hidden_size"]
    inter = cfg.get("intermediate_size") or 4 * h
    base["tie_word_embeddings"] = cfg.get("tie_word_embeddings", True)
    linears = attention_projections(h, base["num_heads"], base["num_heads"], base["head_dim"], False, True)
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears + plain_mlp(h, inter)),
                     norm=Norm.LAYER, norm_bias=True, mlp_gated=False, activation=cfg.get("activation_function", "gelu_new"),
                     positions=Positions.LEARNED, learned_position_rows=base["max_position_embeddings"],
                     attention_dropout=cfg.get("attention_dropout", 0.0), hidden_dropout=cfg.get("resid_dropout", 0.0),
                     eager_softmax_fp32=False, sdpa_supported=False, eager_qk_fp32=True,
                     buffer_bytes_per_layer=base["max_position_embeddings"] ** 2)


def parse_gptj(cfg, name):
    base = common_fields(cfg, name, layers_key="n_layer", heads_key="n_head", hidden_key="n_embd")
    h = base["hidden_size"]
    inter = cfg.get("n_inner") or 4 * h
    linears = attention_projections(h, base["num_heads"], base["num_heads"], base["head_dim"])
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears + plain_mlp(h, inter)),
                     norm=Norm.LAYER, norm_bias=True, norms_per_layer=1, mlp_gated=False, parallel_residual=True,
                     activation=cfg.get("activation_function", "gelu_new"), rotary_dim=cfg.get("rotary_dim") or base["head_dim"],
                     lm_head_bias=True, attention_dropout=cfg.get("attn_pdrop", 0.0), hidden_dropout=cfg.get("resid_pdrop", 0.0),
                     sdpa_supported=False, eager_qk_fp32=True)


def parse_gpt_neox(cfg, name):
    base = common_fields(cfg, name)
    h, inter = base["hidden_size"], config_value(cfg, "intermediate_size")
    bias = cfg.get("attention_bias", True)
    linears = attention_projections(h, base["num_heads"], base["num_heads"], base["head_dim"], bias, bias, fused=True)
    rotary = int(base["head_dim"] * cfg.get("rotary_pct", cfg.get("partial_rotary_factor", 1.0)))
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears + plain_mlp(h, inter)),
                     norm=Norm.LAYER, norm_bias=True, mlp_gated=False, activation=cfg.get("hidden_act", "gelu"),
                     parallel_residual=cfg.get("use_parallel_residual", True), rotary_dim=rotary,
                     attention_dropout=cfg.get("attention_dropout", 0.0), hidden_dropout=cfg.get("hidden_dropout", 0.0))


def parse_opt(cfg, name):
    base = common_fields(cfg, name)
    h, inter = base["hidden_size"], config_value(cfg, "ffn_dim")
    base["tie_word_embeddings"] = cfg.get("tie_word_embeddings", True)
    bias = cfg.get("enable_bias", True)
    proj = cfg.get("word_embed_proj_dim", h)
    linears = attention_projections(h, base["num_heads"], base["num_heads"], base["head_dim"], bias, bias)
    final_norm = cfg.get("do_layer_norm_before", True) and not cfg.get("_remove_final_layer_norm", False)
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears + plain_mlp(h, inter, bias)),
                     norm=Norm.LAYER, norm_bias=cfg.get("layer_norm_elementwise_affine", True), mlp_gated=False,
                     activation=cfg.get("activation_function", "relu"), positions=Positions.LEARNED,
                     learned_position_rows=base["max_position_embeddings"] + 2,  # OPT offsets positions by 2
                     final_norm=final_norm, embed_proj_dim=proj if proj != h else 0,
                     attention_dropout=cfg.get("attention_dropout", 0.0), hidden_dropout=cfg.get("dropout", 0.1))


def parse_bloom(cfg, name):
    base = common_fields(cfg, name, layers_key="n_layer", heads_key="n_head")
    h = base["hidden_size"]
    base["tie_word_embeddings"] = cfg.get("tie_word_embeddings", True)
    linears = attention_projections(h, base["num_heads"], base["num_heads"], base["head_dim"], True, True, fused=True)
    return ModelArch(**base, intermediate_size=4 * h, linears=tuple(linears + plain_mlp(h, 4 * h)),
                     norm=Norm.LAYER, norm_bias=True, mlp_gated=False, activation="gelu", positions=Positions.ALIBI,
                     embedding_norm=True, attention_dropout=cfg.get("attention_dropout", 0.0),
                     hidden_dropout=cfg.get("hidden_dropout", 0.0), sdpa_supported=False)


def parse_phi(cfg, name):
    base = common_fields(cfg, name)
    h, inter = base["hidden_size"], config_value(cfg, "intermediate_size")
    linears = attention_projections(h, base["num_heads"], base["num_kv_heads"], base["head_dim"], True, True)
    rotary = int(base["head_dim"] * cfg.get("partial_rotary_factor", 0.5))
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears + plain_mlp(h, inter)),
                     norm=Norm.LAYER, norm_bias=True, norms_per_layer=1, mlp_gated=False, parallel_residual=True,
                     activation=cfg.get("hidden_act", "gelu_new"), rotary_dim=rotary, lm_head_bias=True,
                     attention_dropout=cfg.get("attention_dropout", 0.0), hidden_dropout=cfg.get("resid_pdrop", 0.0))


def parse_stablelm(cfg, name):
    base = common_fields(cfg, name)
    h, inter = base["hidden_size"], config_value(cfg, "intermediate_size")
    linears = attention_projections(h, base["num_heads"], base["num_kv_heads"], base["head_dim"], cfg.get("use_qkv_bias", False))
    if cfg.get("qk_layernorm"):
        raise InvalidConfigError(f"{name}: stablelm with qk_layernorm is not supported yet")
    rotary = int(base["head_dim"] * cfg.get("partial_rotary_factor", 0.25))
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears + gated_mlp(h, inter)),
                     norm=Norm.LAYER, norm_bias=True, norms_per_layer=1 if cfg.get("use_parallel_residual") else 2,
                     parallel_residual=bool(cfg.get("use_parallel_residual")), rotary_dim=rotary,
                     activation=cfg.get("hidden_act", "silu"), attention_dropout=cfg.get("attention_dropout", 0.0),
                     hidden_dropout=cfg.get("hidden_dropout", 0.0))


def parse_falcon(cfg, name):
    base = common_fields(cfg, name, layers_key="num_hidden_layers")
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
    linears = attention_projections(h, base["num_heads"], kv, base["head_dim"], bias, bias, fused=True)
    base["tie_word_embeddings"] = cfg.get("tie_word_embeddings", True)
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears + plain_mlp(h, inter, bias)),
                     norm=Norm.LAYER, norm_bias=True, norms_per_layer=norms, mlp_gated=False, activation="gelu",
                     parallel_residual=cfg.get("parallel_attn", True), rotary_dim=base["head_dim"],
                     attention_dropout=cfg.get("attention_dropout", 0.0), hidden_dropout=cfg.get("hidden_dropout", 0.0))

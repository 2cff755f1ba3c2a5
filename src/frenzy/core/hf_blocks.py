"""The building blocks of the config parsers: projections as HF builds them, config look-ups, and
the Llama-shaped layer most families share (frenzy.core.hf_config registers the parsers)."""

from __future__ import annotations

from typing import Any

from frenzy.core.errors import InvalidConfigError
from frenzy.core.model import Linear, ModelArch, TpSplit

Config = dict[str, Any]
COL, ROW = TpSplit.COLUMN, TpSplit.ROW


def projection(name, fan_in, fan_out, bias, split, targets=None, per_expert=False) -> Linear:
    return Linear(
        name=name,
        in_features=fan_in,
        out_features=fan_out,
        bias=bias,
        split=split,
        targets=frozenset(targets or {name}),
        per_expert=per_expert,
    )


def attention_projections(h, heads, kv_heads, head_dim, qkv_bias=False, o_bias=False, fused=False) -> list[Linear]:
    q_out, kv_out = heads * head_dim, kv_heads * head_dim
    if fused:
        qkv = projection("qkv", h, q_out + 2 * kv_out, qkv_bias, COL, {"q", "k", "v"})
        return [qkv, projection("o", q_out, h, o_bias, ROW)]
    return [
        projection("q", h, q_out, qkv_bias, COL),
        projection("k", h, kv_out, qkv_bias, COL),
        projection("v", h, kv_out, qkv_bias, COL),
        projection("o", q_out, h, o_bias, ROW),
    ]


def gated_mlp(h, inter, bias=False, per_expert=False, fused=False) -> list[Linear]:
    if fused:
        up = [projection("gate_up", h, 2 * inter, bias, COL, {"gate", "up"}, per_expert)]
    else:
        up = [projection("gate", h, inter, bias, COL, None, per_expert), projection("up", h, inter, bias, COL, None, per_expert)]
    return [*up, projection("down", inter, h, bias, ROW, None, per_expert)]


def plain_mlp(h, inter, bias=True) -> list[Linear]:
    return [projection("up", h, inter, bias, COL), projection("down", inter, h, bias, ROW)]


def config_value(cfg: Config, *names, default=None):
    for name in names:
        if cfg.get(name) is not None:
            return cfg[name]
    if default is not None:
        return default
    raise InvalidConfigError(f"config.json lacks '{names[0]}' (model_type {cfg.get('model_type')}); add it")


def common_fields(cfg: Config, name: str, *, layers_key="num_hidden_layers", heads_key="num_attention_heads",
            hidden_key="hidden_size") -> dict:
    h = config_value(cfg, hidden_key)
    heads = config_value(cfg, heads_key)
    kv = cfg.get("num_key_value_heads") or heads
    return dict(
        name=name,
        family=cfg["model_type"],
        vocab_size=config_value(cfg, "vocab_size"),
        hidden_size=h,
        num_layers=config_value(cfg, layers_key),
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=cfg.get("head_dim") or h // heads,
        max_position_embeddings=config_value(cfg, "max_position_embeddings", "n_positions", "seq_length", default=2048),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
    )


def llama_like(cfg: Config, name: str, *, qkv_bias=None, tie_default=False, **overrides) -> ModelArch:
    base = common_fields(cfg, name)
    base["tie_word_embeddings"] = bool(cfg.get("tie_word_embeddings", tie_default))
    inter = config_value(cfg, "intermediate_size")
    bias = cfg.get("attention_bias", False) if qkv_bias is None else qkv_bias
    linears = attention_projections(base["hidden_size"], base["num_heads"], base["num_kv_heads"], base["head_dim"],
                         qkv_bias=bias, o_bias=cfg.get("attention_bias", False) and qkv_bias is None)
    linears += gated_mlp(base["hidden_size"], inter, bias=cfg.get("mlp_bias", False))
    args = dict(base, intermediate_size=inter, linears=tuple(linears), rotary_dim=base["head_dim"],
                sliding_window=sliding_window_of(cfg),
                activation=cfg.get("hidden_act", "silu"), attention_dropout=cfg.get("attention_dropout", 0.0))
    args.update(overrides)
    return ModelArch(**args)


def sliding_window_of(cfg: Config) -> int:
    if not cfg.get("use_sliding_window", True):  # Qwen2 configs carry a window they do not use
        return 0
    return int(cfg.get("sliding_window") or 0)

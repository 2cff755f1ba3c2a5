"""What Frenzy plans: causal (decoder-only) transformer language models.

Encoder-only, encoder-decoder and state-space or hybrid models train with memory that the planner's
formulas do not describe (cross-attention caches, SSM scan states, recurrent conv buffers), so a
config of one of those kinds is refused before any parser sees it, with the reason and a decoder-only
catalog model of similar size to plan instead. The kind is read from the config's own fields where
they say it (is_encoder_decoder, SSM state keys, per-layer mixer lists); only encoder-only models
need a name table, because their configs do not mark themselves.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

from frenzy.core.errors import InvalidConfigError

# Encoder-only model_types (masked-LM encoders). Their configs carry no is_encoder/is_decoder field.
ENCODER_ONLY = frozenset({
    "albert", "bert", "big_bird", "camembert", "data2vec-text", "deberta", "deberta-v2", "distilbert", "electra",
    "ernie", "esm", "flaubert", "funnel", "longformer", "megatron-bert", "mobilebert", "modernbert", "mpnet",
    "nomic_bert", "rembert", "roberta", "roformer", "squeezebert", "xlm", "xlm-roberta", "xlm-roberta-xl",
})
# Keys only state-space blocks have (Mamba's state_size, Jamba/Zamba/Bamba's mamba_d_state, Nemotron-H's
# ssm_state_size, Falcon-H1's mamba_d_ssm, RecurrentGemma's lru_width).
SSM_KEYS = ("state_size", "ssm_state_size", "mamba_d_state", "mamba_d_ssm", "ssm_cfg", "d_state", "lru_width")
# Per-layer mixer lists, and the words in them that name a mixer other than softmax attention.
LAYER_LIST_KEYS = ("layer_types", "layers_block_type", "block_types", "hybrid_override_pattern")
NON_ATTENTION_MIXERS = ("mamba", "linear", "ssm", "recurrent", "rwkv", "conv", "retention")
EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")


def _first(cfg: dict, *keys) -> Any:
    return next((cfg[k] for k in keys if isinstance(cfg.get(k), (int, float)) and cfg[k] > 0), None)


def _non_attention_layers(cfg: dict) -> list[str]:
    found = []
    for key in LAYER_LIST_KEYS:
        value = cfg.get(key)
        if isinstance(value, str):  # Nemotron-H: "M-M-M*-...", M a Mamba layer, * attention
            if "M" in value:
                found.append(f"{key} has Mamba layers")
        elif isinstance(value, list):
            mixers = sorted({str(v) for v in value if any(m in str(v).lower() for m in NON_ATTENTION_MIXERS)})
            if mixers:
                found.append(f"{key} include {', '.join(mixers)}")
    return found


def model_kind(cfg: dict) -> tuple[str, str] | None:
    """(kind, the config evidence for it) for a model Frenzy does not plan; None for a causal LM."""
    model_type = cfg.get("model_type")
    if cfg.get("is_encoder_decoder"):
        return "an encoder-decoder model", "is_encoder_decoder is true"
    architectures = [str(a) for a in cfg.get("architectures") or []]
    if model_type in ENCODER_ONLY:
        return "an encoder-only model", "a bidirectional masked-LM encoder without a causal LM head"
    if architectures and all("MaskedLM" in a for a in architectures):
        return "an encoder-only model", f"architectures {', '.join(architectures)}"
    ssm_keys = [k for k in SSM_KEYS if k in cfg]
    mixers = _non_attention_layers(cfg)
    if ssm_keys or mixers:
        evidence = "; ".join(([f"it sets {', '.join(ssm_keys)}"] if ssm_keys else []) + mixers)
        # Pure Mamba configs have no attention heads (Mamba-2's num_heads are SSM heads).
        if _first(cfg, "num_attention_heads") is not None:
            return "a hybrid of attention and state-space or linear-attention layers", evidence
        return "a state-space model", evidence
    return None


def _rough_params(cfg: dict) -> int | None:
    """Parameters to within a factor that ranks sizes, from any family's field names: attention
    4h² and MLP 2-3·h·ffn (per expert) per layer, encoder and decoder stacks added, plus the embedding."""
    h = _first(cfg, "hidden_size", "d_model", "n_embd")
    layers = (_first(cfg, "num_hidden_layers", "num_layers", "n_layer", "encoder_layers") or 0) + \
        (_first(cfg, "num_decoder_layers", "decoder_layers") or 0)
    if not h or not layers:
        return None
    ffn = _first(cfg, "intermediate_size", "d_ff", "encoder_ffn_dim", "ffn_dim", "n_inner") or 4 * h
    gated = cfg.get("hidden_act") == "silu" or str(cfg.get("feed_forward_proj", "")).startswith("gated")
    experts = _first(cfg, *EXPERT_KEYS) or 1  # all experts: total parameters decide the memory
    vocab = _first(cfg, "vocab_size") or 0
    return int(layers * (4 * h * h + experts * (3 if gated else 2) * h * ffn) + vocab * h)


def similar_catalog_model(cfg: dict, supported: Collection[str]) -> str | None:
    """The dense, text-only catalog model of a supported type closest in rough size to `cfg`."""
    from frenzy.core import catalog

    size = _rough_params(cfg)
    if size is None:
        return None
    best, best_gap = None, math.inf
    for repo_id in catalog.model_names():
        other = catalog.model_config(repo_id)
        if other.get("model_type") not in supported or "text_config" in other or any(k in other for k in EXPERT_KEYS):
            continue
        other_size = _rough_params(other)
        if other_size and abs(math.log(other_size / size)) < best_gap:
            best, best_gap = repo_id, abs(math.log(other_size / size))
    return best


def require_causal_lm(cfg: dict, name: str, supported: Collection[str]) -> None:
    """Raise InvalidConfigError, saying why and what to use instead, unless `cfg` (or the text model
    of a multimodal config) is a causal transformer LM."""
    for part in (cfg, cfg.get("text_config")):
        found = model_kind(part) if isinstance(part, dict) else None
        if found is None:
            continue
        kind, evidence = found
        model_type = part.get("model_type") or cfg.get("model_type") or "this model"
        alternative = similar_catalog_model(part, supported)
        hint = (f"For a decoder-only model of similar size, plan {alternative} instead." if alternative
                else "Plan a decoder-only model instead (`frenzy models` lists them).")
        raise InvalidConfigError(f"{name}: Frenzy plans causal language models; {model_type} is {kind} "
                                 f"({evidence}). {hint}")

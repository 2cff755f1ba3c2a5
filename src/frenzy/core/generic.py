"""Any causal LM transformers can build, planned without a formula of its own: the profiled path.

A family with a parser in `hf_config` is described by formulas. Any other model_type is described
by its real module tree: `frenzy.memory.trace.structure` builds the model on the meta device once
and this module turns what it found into a `ModelArch` whose parameter counts are exact (so
weights, gradients and optimizer state are too), with `profile_key` set so that activations come
from a per-layer profile the tracer measures (`frenzy.memory.profiled`).

Both the structure and the profiles are cached on disk, keyed by the config's digest and the
installed transformers version, under $FRENZY_CACHE_DIR (default ~/.cache/frenzy). Only a cache
miss needs PyTorch and transformers (the `trace` extra); later calls are pure Python.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from importlib import metadata
from pathlib import Path

from frenzy.core.errors import FrenzyError, InvalidConfigError
from frenzy.core.model import Linear, ModelArch, Norm, TpSplit
from frenzy.core.one_at_a_time import profiler_turn

LAYER_COUNT_KEYS = ("num_hidden_layers", "n_layer", "num_layers")

# Leaf names of projections -> the normalised LoRA targets they answer to (q, k, v, o, gate, up,
# down). A name not listed is a projection no named target reaches (a router, a shared-expert gate).
_TARGETS = {
    "q": ("q_proj", "q_a_proj", "q_b_proj", "query", "wq"),
    "k": ("k_proj", "key", "wk"),
    "v": ("v_proj", "value", "wv"),
    "q,k,v": ("qkv_proj", "query_key_value", "c_attn", "wqkv", "w_pack"),
    "k,v": ("kv_proj", "kv_a_proj_with_mqa", "kv_b_proj"),
    "o": ("o_proj", "out_proj", "wo", "dense"),
    "gate": ("gate_proj", "w1"),
    "up": ("up_proj", "w3", "c_fc", "fc1", "fc_in", "dense_h_to_4h"),
    "gate,up": ("gate_up_proj",),
    "down": ("down_proj", "w2", "fc2", "fc_out", "dense_4h_to_h", "c_proj"),
}
_TARGET_OF = {leaf: targets for targets, leaves in _TARGETS.items() for leaf in leaves}


def lora_target_of(leaf: str) -> str:
    """The LoRA targets a projection named `leaf` answers to, comma-joined ('' for none)."""
    return _TARGET_OF.get(leaf.lower(), "")


def text_config(cfg: dict) -> dict:
    """The language model's config: a multimodal config's `text_config` (Gemma 3, Llama 4), whose
    model_type defaults to '<type>_text' as transformers names it; otherwise the config itself."""
    text = cfg.get("text_config")
    if not isinstance(text, dict):
        return cfg
    out = dict(text)
    out.setdefault("model_type", f"{cfg.get('model_type')}_text")
    for key in ("tie_word_embeddings", "_name_or_path"):
        if key in cfg and key not in out:
            out[key] = cfg[key]
    return out


def per_layer_keys(cfg: dict) -> list[str]:
    """Config keys that hold one entry per decoder layer (layer_types, no_rope_layers ...); none when
    the config leaves the layer count to transformers' default."""
    layers = next((cfg[k] for k in LAYER_COUNT_KEYS if isinstance(cfg.get(k), int)), 0)
    return sorted(k for k, v in cfg.items() if isinstance(v, list) and len(v) == layers and layers > 1)


def per_layer_maps(cfg: dict, layers: int | None = None) -> list[str]:
    """Config keys that map decoder layer indices to settings of those layers (transformers'
    `per_layer_config`: {"05": {"head_dim": 512}, ...}, keys as digits); `layers`: the layer count,
    read from `cfg` where not given."""
    if layers is None:
        layers = next((cfg[k] for k in LAYER_COUNT_KEYS if isinstance(cfg.get(k), int)), 0)
    return sorted(k for k, v in cfg.items() if isinstance(v, dict) and v and all(
        isinstance(i, int) and 0 <= i < layers or isinstance(i, str) and i.isdigit() and int(i) < layers for i in v))


def cache_dir() -> Path:
    return Path(os.environ.get("FRENZY_CACHE_DIR") or Path.home() / ".cache" / "frenzy")


def config_digest(cfg: dict) -> str:
    """Key of a model's cached structure and profiles: its architecture config and transformers' version."""
    kept = {k: v for k, v in cfg.items() if not k.startswith("_") and k not in ("transformers_version",)}
    try:
        version = metadata.version("transformers")
    except metadata.PackageNotFoundError:
        version = "none"
    text = json.dumps(kept, sort_keys=True, default=str) + version
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def model_folder(digest: str) -> Path:
    return cache_dir() / "models" / digest


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # absent or torn (a writer died): measured again


def write_json(path: Path, data: dict) -> None:
    """Write atomically, so a concurrent reader sees the old file or the new one, never half."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)
    except OSError as exc:
        raise FrenzyError(f"cannot write the profile cache {path} ({exc.strerror}); set FRENZY_CACHE_DIR to a "
                          "writable folder") from None


# What a structure.json holds changes with Frenzy (2: transformers' Conv1D read as a projection, a
# convolution's 3-D weight no longer taken for stacked experts, the layers' buffers, whether the
# model can recompute its layers; 3: a tied head's bias counted once, sizes under transformers' own
# names; 4: the parameters a text step never reads): one written by an older Frenzy is described again.
STRUCTURE_VERSION = 4


def _current(structure: dict | None) -> dict | None:
    return structure if structure is not None and structure.get("version") == STRUCTURE_VERSION else None


def structure_of(cfg: dict) -> tuple[dict, str]:
    """(the model's structure, its digest), from the cache or measured on the meta device."""
    cfg = text_config(cfg)
    digest = config_digest(cfg)
    folder = model_folder(digest)
    structure = _current(read_json(folder / "structure.json"))
    if structure is None:
        _check_size(cfg)
        with profiler_turn():
            structure = _current(read_json(folder / "structure.json"))  # described while this caller waited?
            if structure is None:
                structure = _describe(cfg)
                write_json(folder / "config.json", cfg)
                write_json(folder / "structure.json", structure)
    return structure, digest


# What building a model's module tree may cost: the meta build makes every layer's modules (and,
# in families that keep them as modules, every expert's), so a config cannot ask for millions.
SIZE_LIMITS = {"decoder layers": (LAYER_COUNT_KEYS, 1024),
               "experts": (("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"), 4096),
               "hidden size": (("hidden_size", "n_embd", "d_model"), 1 << 17),
               "vocabulary": (("vocab_size",), 1 << 23),
               # A causal LM has no classification head, but transformers builds id2label / label2id
               # maps of num_labels entries and copies them with every copy of the config (the
               # profiler makes dozens): 10^6 labels held a request for half a minute and 360 MB.
               # Classification heads in use stay far below this (ImageNet-21k: 21,843 classes).
               "classification labels": (("num_labels",), 1 << 15)}
LABEL_MAPS = ("id2label", "label2id")


def _check_size(cfg: dict) -> None:
    """Refuse, before building anything, a config larger than any trained causal LM."""
    for what, (keys, limit) in SIZE_LIMITS.items():
        for key in keys:
            value = cfg.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= limit):
                raise InvalidConfigError(f"config.json: {key}={value!r} is not a count of {what} Frenzy plans "
                                         f"(a positive integer up to {limit}); check the config")
    most = SIZE_LIMITS["classification labels"][1]
    for key in LABEL_MAPS:
        value = cfg.get(key)
        if isinstance(value, (dict, list)) and len(value) > most:
            raise InvalidConfigError(f"config.json: {key} has {len(value):,} entries, more classification labels "
                                     f"than Frenzy plans (up to {most}); a causal LM does not use them: leave it out")


def _describe(cfg: dict) -> dict:
    try:
        from frenzy.memory.trace.structure import describe
    except ImportError as exc:
        raise InvalidConfigError(
            f"model_type '{cfg.get('model_type')}' has no formula in Frenzy; profiling it once needs PyTorch and "
            f"transformers ({exc.name} is missing): pip install 'frenzy[trace]'") from None
    try:
        return {**describe(cfg), "version": STRUCTURE_VERSION}
    except FrenzyError:
        raise
    except Exception as exc:  # transformers and torch building a model from a request's config: anything
        raise InvalidConfigError(f"transformers cannot build model_type '{cfg.get('model_type')}' from this config "
                                 f"({exc}); check its sizes") from exc


def generic_arch(cfg: dict, name: str) -> ModelArch:
    """A ModelArch for a family without a parser, from its real module tree (see module docstring)."""
    structure, digest = structure_of(cfg)
    return arch_from_structure(structure, text_config(cfg), name, digest)


def _projection(part: dict) -> Linear:
    target = part["target"]
    return Linear(name=part["name"], in_features=part["in"], out_features=part["out"], bias=part["bias"],
                  split=TpSplit.COLUMN, targets=frozenset(target.split(",") if target else {part["name"]}))


def _kind_params(kind: dict) -> tuple[int, int]:
    """(nn.Linear parameters, everything else incl. fused experts) of one layer kind."""
    linear = sum(p["in"] * p["out"] + (p["out"] if p["bias"] else 0) for p in kind["linears"])
    experts = sum(p["experts"] * p["in"] * p["out"] for p in kind["experts"])
    return linear, experts + kind["other_params"]


def _first(cfg: dict, *keys, default=0):
    return next((cfg[k] for k in keys if isinstance(cfg.get(k), (int, float)) and cfg[k]), default)


def arch_from_structure(structure: dict, cfg: dict, name: str, digest: str) -> ModelArch:
    cfg = {**cfg, **structure["named_sizes"]}
    counts = Counter(structure["layer_kinds"])
    common_index = counts.most_common(1)[0][0]
    common = structure["kinds"][common_index]
    linears = [_projection(p) for p in common["linears"]]
    expert_counts = {p["experts"] for p in common["experts"]}
    # the routed experts' stacks; a stack of fewer (Inkling's two shared experts beside four routed
    # ones) counts among the layer's other parameters, exactly
    routed = [p for p in common["experts"] if p["experts"] == max(expert_counts, default=0)]
    linears += [Linear(name=p["name"], in_features=p["in"], out_features=p["out"], bias=False,
                       split=TpSplit.COLUMN, targets=frozenset({p["name"]}), per_expert=True)
                for p in routed]
    common_linear, common_other = _kind_params(common)
    irregular_linear = irregular_other = 0
    for kind, n in counts.items():
        linear, other = _kind_params(structure["kinds"][kind])
        irregular_linear += n * (linear - common_linear)
        irregular_other += n * (other - common_other)
    hidden = structure["hidden_size"]
    norm = Norm.LAYER if structure["norm"] == "layernorm" else Norm.RMS
    norm_bias = norm is Norm.LAYER and structure["outside_other_params"] >= 2 * hidden
    final_norm = structure["outside_other_params"] >= hidden
    final_norm_params = (2 if norm_bias else 1) * hidden if final_norm else 0
    heads = int(_first(cfg, "num_attention_heads", "n_head", "num_heads", default=1))
    kv_heads = int(_first(cfg, "num_key_value_heads", "num_kv_heads", default=heads))
    gated = any("gate" in lin.targets for lin in linears) or bool(expert_counts)
    return ModelArch(
        name=name, family=structure["model_type"], vocab_size=structure["vocab_size"], hidden_size=hidden,
        num_layers=len(structure["layer_kinds"]), num_heads=heads,
        num_kv_heads=kv_heads if heads % max(kv_heads, 1) == 0 else heads,
        head_dim=int(_first(cfg, "head_dim", default=hidden // heads)),
        intermediate_size=int(_first(cfg, "moe_intermediate_size", "intermediate_size", "ffn_dim", default=4 * hidden)),
        max_position_embeddings=int(_first(cfg, "max_position_embeddings", "n_positions", "seq_length",
                                           default=2048)),
        linears=tuple(linears), norm=norm, norm_bias=norm_bias, mlp_gated=gated,
        activation=str(cfg.get("hidden_act") or cfg.get("hidden_activation") or "silu"),
        tie_word_embeddings=structure["tied"], lm_head_bias=structure["head_bias"], final_norm=final_norm,
        num_experts=max(expert_counts) if expert_counts else 0,
        experts_per_token=int(_first(cfg, "num_experts_per_tok", "moe_topk", "moe_k", "top_k", "experts_per_token",
                                     default=1)) if expert_counts else 0,
        logit_softcap=float(cfg.get("final_logit_softcapping") or 0.0),
        sliding_window=int(cfg.get("sliding_window") or 0),
        attention_chunk=int(cfg.get("attention_chunk_size") or 0),
        profile_key=digest, recompute=structure["recompute"],
        buffer_bytes_per_layer=structure["buffer_bytes_per_layer"],
        layer_other_params=common_other - sum(p["experts"] * p["in"] * p["out"] for p in routed),
        irregular_linear_params=irregular_linear,
        irregular_other_params=irregular_other + structure["outside_other_params"] - final_norm_params,
        unused_params=structure["unused_params"],
    )

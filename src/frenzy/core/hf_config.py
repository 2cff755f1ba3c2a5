"""Hugging Face config.json -> ModelArch: one parser per model_type, registered in a dict, and the
profiled path (frenzy.core.generic) for any other causal LM.

Each parser states the layer's projections as HF builds them, so parameter counts, LoRA targets
and tensor-parallel shards follow the real module tree.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from frenzy.core.errors import InvalidConfigError
from frenzy.core.generic import _check_size as check_config_size  # the profiled path's limits, for all
from frenzy.core.generic import generic_arch
from frenzy.core.hf_blocks import Config
from frenzy.core.model import ModelArch
from frenzy.core.parsers_classic import (parse_bloom, parse_falcon, parse_gpt2, parse_gpt_neo,
                                         parse_gpt_neox, parse_gptj, parse_opt, parse_phi, parse_stablelm)
from frenzy.core.parsers_deepseek import parse_deepseek_v2, parse_deepseek_v3
from frenzy.core.parsers_dense import (parse_cohere, parse_cohere2, parse_gemma, parse_gemma2, parse_gemma3,
                                       parse_gemma3_text, parse_glm4, parse_granite, parse_llama,
                                       parse_olmo2, parse_phi3, parse_qwen, parse_qwen2, parse_qwen3,
                                       parse_smollm3, parse_starcoder2)
from frenzy.core.parsers_moe import parse_mixtral, parse_olmoe, parse_phimoe, parse_qwen2_moe, parse_qwen3_moe
from frenzy.core.parsers_recent_moe import parse_gpt_oss, parse_llama4, parse_llama4_text
from frenzy.core.safe_read import read_regular

MAX_PARAMS = 10**15  # five hundred times the largest trained LMs (~2 T parameters)

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
    "deepseek_v2": parse_deepseek_v2,
    "deepseek_v3": parse_deepseek_v3,
    "gpt_oss": parse_gpt_oss,
    "llama4_text": parse_llama4_text,
    "llama4": parse_llama4,
}


def arch_from_config(cfg: Config, name: str, profiled: bool = False) -> ModelArch:
    """The ModelArch of a config: from the family's parser, or (no parser, or `profiled`) from the
    model's module tree with activations profiled by the tracer (frenzy.core.generic)."""
    from frenzy.core.scope import require_causal_lm

    model_type = config_family(cfg)
    require_causal_lm(cfg, name, supported=PARSERS)  # encoder, encoder-decoder and SSM models: why not, and what instead
    for part in (cfg, cfg.get("text_config")):
        if isinstance(part, dict):  # sizes beyond any trained LM would make even the formulas run for ever
            check_config_size(part)
    if profiled:
        return generic_arch(cfg, name)
    if model_type not in PARSERS:
        # No formula: the family is described by its real module tree and a traced profile.
        return generic_arch(cfg, name)
    try:
        return _within_size(PARSERS[model_type](cfg, name))
    except (TypeError, ArithmeticError, ValueError) as exc:  # ArithmeticError: a zero or an infinite size
        if isinstance(exc, InvalidConfigError):
            raise
        raise InvalidConfigError(f"{name}: config.json is inconsistent ({exc}); check its sizes") from exc


def _within_size(arch: ModelArch) -> ModelArch:
    """The formulas' model, refused when its parameter count is no trained LM's: sizes the checks on
    single fields leave open (expert ranks, dense layers, rotary fractions) still multiply out."""
    params = arch.num_params
    if not 0 < params <= MAX_PARAMS:
        magnitude = f"about 10^{int(abs(params).bit_length() * 0.30103)}" if params else "0"
        raise InvalidConfigError(f"{arch.name}: config.json describes {'-' if params < 0 else ''}{magnitude} "
                                 f"parameters, not a model Frenzy plans (1 .. {MAX_PARAMS:.0e}); check its sizes")
    return arch


def config_family(cfg: Config) -> str:
    """The config's model_type, which every later step dispatches on (the original Qwen's configs
    name only their architecture: model_type is set for them). Refused at once, before transformers
    is imported, when it is missing or not text, or when `architectures` is not a list of class names:
    such a config is no Hugging Face config, and a value of another JSON type would only fail later."""
    for part, where in ((cfg, "config.json"), (cfg.get("text_config"), "its text_config")):
        if not isinstance(part, dict):
            continue
        architectures, kind = part.get("architectures"), part.get("model_type")
        if architectures is not None and not (isinstance(architectures, list)
                                              and all(isinstance(a, str) for a in architectures)):
            raise InvalidConfigError(f"{where} has architectures={_shown(architectures)}, not a list of "
                                     "model class names; fix it or leave it out")
        if kind is not None and not isinstance(kind, str):
            raise InvalidConfigError(f"{where} has model_type={_shown(kind)}, not the name of a model "
                                     "family; write it as text (e.g. \"llama\")")
    if cfg.get("model_type") is None and "QWenLMHeadModel" in (cfg.get("architectures") or []):
        cfg["model_type"] = "qwen"
    if not cfg.get("model_type"):
        raise InvalidConfigError("config.json has no model_type, which names the model's family; add it "
                                 "(e.g. \"model_type\": \"llama\") or pass the model's own config.json")
    return cfg["model_type"]


def _shown(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def load_config(name_or_path: str, *, paths: bool = True) -> tuple[Config, str]:
    """A catalog name (repo id or alias), a repo id in the local Hugging Face cache, a post-training
    variant of a catalog model (`...-Instruct`: its base's config), or, with `paths`, a path to a
    config.json (or a folder holding one) -> (the raw HF config dict, the model's display name).
    Without `paths` the value is a name whatever files exist where the process runs."""
    from frenzy.core import catalog, hf_cache
    from frenzy.core.errors import UnknownNameError

    path = Path(name_or_path)
    if paths and _probe(path.is_dir):
        path = path / "config.json"
    if paths and (path.suffix == ".json" or _probe(path.exists)):
        if not path.exists():
            raise InvalidConfigError(f"config file {path} does not exist; pass a catalog name or a config.json path")
        raw = read_regular(path, max_bytes=hf_cache.MAX_CONFIG_BYTES, what="config file")
        try:
            cfg = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
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


def _probe(check: Callable[[], bool]) -> bool:
    """A path check that is False (a name, then) for what cannot be a path at all: too long, a NUL."""
    try:
        return check()
    except (OSError, ValueError):
        return False


def load_model(name_or_path: str, profiled: bool = False) -> ModelArch:
    return arch_from_config(*load_config(name_or_path), profiled=profiled)

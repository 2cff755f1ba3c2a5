"""Helpers shared by the third-party estimator adapters in bench/estimators/.

Nothing here models memory: it only turns a catalog config dict into what the tools take
(a transformers config, a model built on the meta device) and builds stand-in modules for
estimators whose tool cannot be imported.
"""

from __future__ import annotations

import functools
import json
import types
from typing import Any

GiB = 1024**3

# Keys the project adds to the HF config.json files in its catalog (provenance notes).
_PRIVATE_PREFIXES = ("_frenzy",)


def clean_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """The HF config as it is on the Hub: the catalog's own annotations removed."""
    return {k: v for k, v in cfg.items() if not k.startswith(_PRIVATE_PREFIXES)}


def hf_config(cfg: dict[str, Any]):
    """A transformers PretrainedConfig built offline from the config dict (no Hub access)."""
    import transformers

    d = clean_config(cfg)
    model_type = d.pop("model_type")
    return transformers.AutoConfig.for_model(model_type, **d)


def is_encoder_decoder(cfg: dict[str, Any]) -> bool:
    return bool(cfg.get("is_encoder_decoder")) or cfg.get("model_type") in {"t5", "mt5", "bart", "mbart", "umt5"}


@functools.lru_cache(maxsize=16)
def _meta_model(cfg_json: str, auto_class: str):
    import torch
    import transformers
    from accelerate import init_empty_weights

    cfg = json.loads(cfg_json)
    config = hf_config(cfg)
    constructor = getattr(transformers, auto_class)
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        with init_empty_weights():
            return constructor.from_config(config, dtype=torch.float32)
    finally:
        transformers.logging.set_verbosity(verbosity)


def meta_model(cfg: dict[str, Any], auto_class: str):
    """The model built from `cfg` on the meta device (no memory, no download), fp32 parameters.

    Raises whatever transformers raises when it cannot build the architecture offline (for
    example configs that need `trust_remote_code`). Cached: callers must not modify it.
    """
    return _meta_model(json.dumps(clean_config(cfg), sort_keys=True), auto_class)


def training_auto_class(cfg: dict[str, Any]) -> str:
    """The transformers auto class a training script would build for this config."""
    return "AutoModelForSeq2SeqLM" if is_encoder_decoder(cfg) else "AutoModelForCausalLM"


def unavailable_module(module_name: str, name: str, reason: str) -> types.ModuleType:
    """A stand-in estimator module: predict() returns None, describe() says why."""
    mod = types.ModuleType(module_name)
    mod.NAME = name
    mod.AVAILABLE = False
    mod.UNAVAILABLE_REASON = reason
    mod.predict = lambda row: None
    mod.describe = lambda: f"{name}: not available in this environment ({reason}); it predicts nothing."
    return mod

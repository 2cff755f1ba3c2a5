"""The module tree of any causal LM transformers can build, read from the model on the meta device.

`describe(cfg)` builds the model from its config without memory (meta tensors) and returns, as
plain JSON, what exact weight, gradient and optimizer-state accounting needs: the embedding and
LM head (tied or not), the final norm, and for every decoder layer its kind and its parameters
split into projections (`nn.Linear`: fan-in, fan-out, bias, the LoRA target their name answers
to), fused 3-D expert tensors (one slice per expert) and the rest (norms, routers, biases).

Layers are grouped into kinds by their parameter shapes plus the per-layer entries of the config
(`layer_types`, `no_rope_layers` ...): DeepSeek's first dense layers and its MoE layers, Llama 4's
interleaved dense and MoE layers, Gemma 3's sliding and global layers are different kinds.
`reduced_layers` picks the few layers a profile needs to see every kind.
"""

from __future__ import annotations

from collections import Counter
from contextlib import nullcontext
from functools import partial

import torch
from torch import nn

from frenzy.core.errors import InvalidConfigError
from frenzy.core.generic import lora_target_of, per_layer_keys, text_config
from frenzy.memory.trace.build import causal_lm_class, hf_config
from frenzy.train.layers import decoder_layers


def _unknown(kind) -> InvalidConfigError:
    return InvalidConfigError(f"model_type '{kind}' is neither a family Frenzy has formulas for nor a causal LM "
                              "the installed transformers can build; pass a Hugging Face causal LM config")


def build_meta(cfg: dict) -> nn.Module:
    """The model on the meta device (its type known to transformers: describe checks first)."""
    config = hf_config(cfg)
    try:
        model = causal_lm_class(config)
    except ValueError:
        raise _unknown(cfg.get("model_type")) from None
    with torch.device("meta"):
        return model._from_config(config)


def _features(module: nn.Module) -> tuple[int, int] | None:
    """(in, out) features of a projection: an nn.Linear, or transformers' Conv1D (GPT-1's and
    GPT-2's linear layer with its weight stored transposed, (in, out), which peft adapts too)."""
    from transformers.pytorch_utils import Conv1D

    if isinstance(module, nn.Linear):
        return module.in_features, module.out_features
    if isinstance(module, Conv1D):
        return module.nx, module.nf
    return None


def _layer_parts(layer: nn.Module) -> dict:
    linears, experts, other = [], [], 0
    in_linear = set()
    for name, module in layer.named_modules():
        features = _features(module)
        if features is not None:
            linears.append({"name": name, "in": features[0], "out": features[1],
                            "bias": module.bias is not None, "target": lora_target_of(name.rsplit(".", 1)[-1])})
            in_linear.update(id(p) for p in module.parameters(recurse=False))
    # a convolution's weight is 3-D too (out, in / groups, kernel), but no stack of experts
    in_conv = {id(p) for m in layer.modules() if isinstance(m, nn.modules.conv._ConvNd) for p in m.parameters(False)}
    for name, param in layer.named_parameters():
        if id(param) in in_linear:
            continue
        if param.dim() == 3 and id(param) not in in_conv:  # fused experts (E, out, in): a slice per expert
            experts.append({"name": name, "experts": param.shape[0], "in": param.shape[2], "out": param.shape[1]})
        else:
            other += param.numel()
    return {"linears": linears, "experts": experts, "other_params": other}


def _signature(parts: dict, cfg: dict, index: int) -> str:
    shapes = [(p["name"], p["in"], p["out"], p["bias"]) for p in parts["linears"]]
    shapes += [(p["name"], p["experts"], p["in"], p["out"]) for p in parts["experts"]]
    per_layer = [(key, cfg[key][index]) for key in per_layer_keys(cfg)]
    return repr((shapes, parts["other_params"], per_layer))


_NAMED_SIZES = ("num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings")


def describe(cfg: dict) -> dict:
    """JSON structure of the causal LM built from `cfg` (its text sub-config for multimodal ones)."""
    from transformers import CONFIG_MAPPING

    cfg = text_config(cfg)
    if cfg.get("model_type") not in CONFIG_MAPPING:  # before transformers lists every type it knows
        raise _unknown(cfg.get("model_type"))
    _require_causal_lm_with_defaults(cfg)
    model = build_meta(cfg)
    layers = decoder_layers(model)
    embedding = model.get_input_embeddings().weight
    head = model.get_output_embeddings()
    tied = head is not None and head.weight is embedding
    kinds: dict[str, int] = {}
    layer_kinds, layer_parts = [], []
    for index, layer in enumerate(layers):
        parts = _layer_parts(layer)
        kind = kinds.setdefault(_signature(parts, cfg, index), len(kinds))
        layer_kinds.append(kind)
        if kind == len(layer_parts):
            layer_parts.append(parts)
    in_layers = {id(p) for p in layers.parameters()}
    outside = [p for p in model.parameters() if id(p) not in in_layers]
    # a tied head's bias is the head's own (ModernBERT-decoder's), counted with it as head_bias
    head_params = 0 if head is None else sum(p.numel() for p in head.parameters() if p is not embedding)
    return {
        "model_type": cfg["model_type"],
        "vocab_size": embedding.shape[0],
        "hidden_size": embedding.shape[1],
        "num_params": sum(p.numel() for p in model.parameters()),
        "embedding_params": embedding.numel(),
        "head_params": head_params,
        "head_bias": bool(head is not None and getattr(head, "bias", None) is not None),
        "tied": tied,
        "outside_other_params": sum(p.numel() for p in outside) - embedding.numel() - head_params,
        "layer_kinds": layer_kinds,
        "kinds": layer_parts,
        "norm": _norm_kind(model),
        # non-parameter tensors the layers hold (GPT-1's float causal mask, n_positions^2 per layer),
        # as built: floats in fp32, which a pure-bf16 model holds in half the bytes
        "buffer_bytes_per_layer": sum(b.numel() * b.element_size() for b in layers.buffers()) // max(len(layers), 1),
        # sizes under transformers' own names, whichever keys the family's config spells them with
        # (DBRX: n_heads, max_seq_len)
        "named_sizes": {key: value for key in _NAMED_SIZES
                        if isinstance(value := _named_size(model.config, key), int) and value > 0},
        # transformers refuses gradient_checkpointing_enable() for a few (mostly older) families
        "recompute": bool(getattr(model, "supports_gradient_checkpointing", False)),
        "unused_params": unused_params(cfg, layer_kinds),
    }


def unused_params(cfg: dict, layer_kinds: list[int]) -> int:
    """Parameters a text step never reads, which the worker freezes (frenzy.train.unused), probed on
    a fake copy holding a layer of every kind (as the profile, every layer up to the last of them
    where the copy cannot run without the ones between): those outside the layers, and a kind whose
    layer never ran times its layers. 0 where no copy runs (every parameter counted as trained)."""
    from frenzy.memory.trace.known_values import run_retrying_with_known_values

    keep = reduced_layers(layer_kinds)
    counts = Counter(layer_kinds)
    for whole_prefix in (False, True):
        try:
            unused, layers = run_retrying_with_known_values(partial(_probe, cfg, keep, whole_prefix))
        except Exception:  # noqa: BLE001 - a copy without the layers between fails in family-specific ways
            continue
        in_layers = {id(p) for layer in layers.values() for p in layer.parameters()}
        outside = sum(p.numel() for p in unused.values() if id(p) not in in_layers)
        skipped = {layer_kinds[index]: sum(p.numel() for p in layer.parameters())
                   for index, layer in layers.items() if all(id(p) in unused for p in layer.parameters())}
        return outside + sum(params * counts[kind] for kind, params in skipped.items())
    return 0


def _probe(cfg: dict, keep: list[int], whole_prefix: bool, known_values: bool) -> tuple[dict, dict]:
    """({id: parameter} a text step never reads, {model layer index: layer}) of a fake copy."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from frenzy.core.training import TrainingConfig
    from frenzy.memory.trace import patches
    from frenzy.memory.trace.build import build_model
    from frenzy.memory.trace.known_values import KnownValues
    from frenzy.train.unused import unused_parameters

    with FakeTensorMode(), patches.gpu_decisions():
        net, _ = build_model(cfg, TrainingConfig(), keep, whole_prefix)
        with KnownValues() if known_values else nullcontext():
            unused = {id(p): p for _, p in unused_parameters(net)}
    layers = decoder_layers(net)
    return unused, dict(enumerate(layers) if whole_prefix else zip(keep, layers))


def _named_size(config, key: str):
    try:
        return getattr(config, key, None)
    except RuntimeError:  # a size that differs by layer refuses a global read (Gemma 4's head_dim)
        return None


def _norm_kind(model: nn.Module) -> str:
    """'layernorm' when the model normalises with nn.LayerNorm-like modules (mean and bias), else 'rmsnorm'."""
    names = Counter(type(m).__name__ for m in model.modules() if "norm" in type(m).__name__.lower())
    layer = sum(n for name, n in names.items() if "layernorm" in name.lower() and "rms" not in name.lower())
    return "layernorm" if layer > sum(names.values()) - layer else "rmsnorm"


def reduced_layers(layer_kinds: list[int]) -> list[int]:
    """Indices of the layers a profile traces, in model order: the first layer of every kind, the
    second layer of the first layer's kind (the model's first layer keeps less when its input needs
    no grad, so it cannot speak for its kind), and the layer after the last of them: a layer's
    output counts as kept until the next layer has read it, so a layer speaks for its kind only
    when another layer follows it; then, where that layer is not of the kind the model's last layer
    is, the next layer that is."""
    first = {}
    for index, kind in enumerate(layer_kinds):
        first.setdefault(kind, index)
    keep = set(first.values())
    again = next((i for i in range(1, len(layer_kinds)) if layer_kinds[i] == layer_kinds[0]), None)
    if again is not None:
        keep.add(again)
    keep = sorted(keep)
    if keep[-1] + 1 < len(layer_kinds):
        keep.append(keep[-1] + 1)
    if layer_kinds[keep[-1]] != layer_kinds[-1]:  # the copy ends as the model does: some families
        # require their last layer's kind (Gemma 4's config turns a last sliding layer into full attention)
        keep.append(next(i for i in range(keep[-1] + 1, len(layer_kinds)) if layer_kinds[i] == layer_kinds[-1]))
    return keep


def _require_causal_lm_with_defaults(cfg: dict) -> None:
    """A config may leave out the very keys that show its kind (`{"model_type": "mamba"}` has no
    state_size): the scope check runs again on it with its class's defaults filled in, before
    anything is built."""
    from transformers import AutoConfig

    from frenzy.core.scope import require_causal_lm

    filled = {**AutoConfig.for_model(cfg["model_type"]).to_dict(), **cfg}
    require_causal_lm(filled, str(cfg["model_type"]), supported=())

"""Temporary patches that make Hugging Face code behave on fake tensors as it does on a GPU.

transformers treats a fake tensor as "tracing" (`is_tracing` returns True for FakeTensor), and then
refuses every decision that needs tensor values. Two of those change memory:

* packed-sequence detection (`find_packed_sequence_indices`) returns the packed-sequence index
  tensor instead of None, so a causal s x s mask is built and SDPA loses `is_causal` (and with it
  the flash kernel). Verified on transformers 5.23: without the patch Llama, Mistral, Qwen2/3,
  GPT-2 and GPT-NeoX pass an explicit mask to every SDPA call (OPT, which derives its positions
  differently, does not). Our inputs are never packed: the patch returns None, as a GPU run does.
* `_ignore_causal_mask_sdpa` will not inspect a 2-D padding mask; a GPU run sees an all-ones mask
  and drops it. Our inputs are never padded, so the patch decides as if none was given. (Defensive:
  no catalog family passes such a mask when called without one on transformers 5.23.)

MoE experts (Mixtral, Qwen2-MoE) use transformers 5's default `grouped_mm` experts implementation:
sort by expert, histc, cumsum offsets and one grouped GEMM over all tokens x top-k rows. Its shapes
do not depend on the routing, so fake tensors run it as is and the memory does not depend on how
balanced the (random) routing is. The fake CPU grouped GEMM accepts bf16 only; for other dtypes the
patch selects transformers' own fallback op, which has the same inputs, outputs and saved tensors.

`attention_recompute` implements Recompute.ATTENTION for eager attention by checkpointing only the
attention core (QK^T, softmax, dropout, PV), the part Korthikanti et al. recompute.
"""

from __future__ import annotations

import sys
from contextlib import ExitStack, contextmanager
from functools import partial

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


@contextmanager
def setattr_during(obj, name: str, value):
    original = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, original)


@contextmanager
def gpu_decisions():
    """Patch transformers' helpers to decide as they would on real, unpadded GPU inputs (each patch
    only where the helper exists in the installed transformers)."""
    from transformers import masking_utils

    with ExitStack() as stack:
        if hasattr(masking_utils, "find_packed_sequence_indices"):
            stack.enter_context(setattr_during(masking_utils, "find_packed_sequence_indices",
                                               lambda position_ids: None))
        if hasattr(masking_utils, "_ignore_causal_mask_sdpa"):
            original_ignore = masking_utils._ignore_causal_mask_sdpa
            stack.enter_context(setattr_during(masking_utils, "_ignore_causal_mask_sdpa",
                                               lambda padding_mask, *a, **k: original_ignore(None, *a, **k)))
        moe = _moe_integration()
        if moe is not None and hasattr(moe, "_can_use_grouped_mm"):
            original_grouped = moe._can_use_grouped_mm
            stack.enter_context(setattr_during(moe, "_can_use_grouped_mm", lambda input, weight, offs: (
                weight.dtype == torch.bfloat16 and original_grouped(input, weight, offs))))
        yield


@contextmanager
def fake_parameter_conversion():
    """A module's `.to(dtype)` on fake parameters (DeepSeek-V4's norms, Inkling's short convolutions
    call it in __init__) replaces each converted parameter by a new one. torch converts a fake
    parameter by swapping it with its converted copy, which fails when anything holds a weak
    reference to it, as FakeTensorMode does ("Couldn't swap ..."); while a model is being built no
    one else holds its parameters yet, so a new Parameter is the same module."""
    from torch._subclasses.fake_tensor import FakeTensor

    original = nn.Module._apply

    def _apply(module, fn, recurse=True):
        if not any(isinstance(p, FakeTensor) for p in module._parameters.values()):
            return original(module, fn, recurse)  # its children come back here
        if recurse:
            for child in module.children():
                child._apply(fn)
        for key, param in module._parameters.items():
            if param is not None:
                with torch.no_grad():
                    converted = fn(param)
                if converted is not param:
                    module._parameters[key] = nn.Parameter(converted, requires_grad=param.requires_grad)
        for key, buffer in module._buffers.items():
            if buffer is not None:
                module._buffers[key] = fn(buffer)
        return module

    with setattr_during(nn.Module, "_apply", _apply):
        yield


@contextmanager
def fake_truncated_normal():
    """torch's `trunc_normal_` redraws until no value falls outside [a, b] and asks `mask.any()`
    each round, which a fake tensor cannot answer (ModernBERT initialises its weights with it). A
    fake weight holds no values, so while a model is built a clamped normal stands in for it."""

    def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
        with torch.no_grad():
            return tensor.normal_(mean, std, generator=generator).clamp_(a, b)

    with ExitStack() as stack:
        stack.enter_context(setattr_during(nn.init, "trunc_normal_", trunc_normal_))
        try:
            from transformers.initialization import TORCH_INIT_FUNCTIONS
        except ImportError:  # transformers 4.x calls torch's own, patched above
            TORCH_INIT_FUNCTIONS = {}
        if "trunc_normal_" in TORCH_INIT_FUNCTIONS:
            stack.enter_context(_item_during(TORCH_INIT_FUNCTIONS, "trunc_normal_", trunc_normal_))
        yield


@contextmanager
def _item_during(mapping: dict, key, value):
    original = mapping[key]
    mapping[key] = value
    try:
        yield
    finally:
        mapping[key] = original


def _moe_integration():
    try:
        from transformers.integrations import moe
    except ImportError:  # transformers 4.x: per-expert nn.Linear modules, no grouped GEMM
        return None
    return moe


def _recomputed(fn, region, context_fn):
    """`fn` under non-reentrant activation checkpointing; the re-run is labelled by `region`."""

    def run(*args, **kwargs):
        with region():
            return fn(*args, **kwargs)

    def checkpointed(*args, **kwargs):
        return checkpoint(run, *args, use_reentrant=False, context_fn=context_fn, **kwargs)

    return checkpointed


_ATTENTION_NAMES = ("self_attn", "attn", "attention", "self_attention")


def _attention_modules(layers: nn.ModuleList) -> list[nn.Module]:
    found = []
    for layer in layers:
        for name in _ATTENTION_NAMES:
            if isinstance(getattr(layer, name, None), nn.Module):
                found.append(getattr(layer, name))
                break
    if len(found) != len(layers):
        raise ValueError("cannot find the attention module of every decoder layer for attention-core recomputation")
    return found


@contextmanager
def attention_recompute(layers: nn.ModuleList, region, context_fn):
    """Checkpoint the eager attention core of every layer.

    transformers' shared `eager_attention_forward` (looked up from the modeling module at call time)
    is wrapped when the model uses it; GPT-J/GPT-Neo's `_attn` method otherwise; for models with
    the core inlined in the attention forward (BLOOM, Falcon) the whole attention module is
    checkpointed, which also recomputes its projections (memory: the module input is kept).
    """
    modeling = sys.modules[type(layers[0]).__module__]
    with ExitStack() as stack:
        if hasattr(modeling, "eager_attention_forward"):
            wrapped = _recomputed(modeling.eager_attention_forward, region, context_fn)
            stack.enter_context(setattr_during(modeling, "eager_attention_forward", wrapped))
        else:
            for module in _attention_modules(layers):
                name = "_attn" if hasattr(module, "_attn") else "forward"
                # Instance attribute shadows the class method; removed again on exit.
                setattr(module, name, _recomputed(getattr(module, name), region, context_fn))
                stack.callback(partial(delattr, module, name))
        yield

"""Activation recomputation as the worker runs it and the tracer traces it (one definition for both).

`full`: every decoder layer is checkpointed (torch.utils.checkpoint, non-reentrant) and keeps only its
inputs. `selective`: the same per-layer checkpoint under PyTorch's selective activation checkpointing
(SAC, `create_selective_checkpoint_contexts`) with the op policy below: the outputs of the ops in
`SAVED_OPS` are kept from the forward and reused by the backward's re-run; every other op is re-run.

Why these ops (FLOPs spent to re-create a byte, against a GPU's ridge point of roughly 150-450
FLOPs per byte of memory traffic, A100 to L40S):
  * projections (`mm`, `addmm`: q/k/v/o, gate/up/down, LoRA's A and B, a router): an output element
    sums over the input width k, 2k FLOPs for 2 bytes (16-bit), k FLOPs per byte kept: 768 for
    GPT-2, 4096 for Llama-3.1-8B. Compute-bound to redo: saved.
  * fused attention kernels (flash, memory-efficient, cuDNN, CPU flash): an output element sums over
    the sequence, about 4s FLOPs for 2 bytes, 2s per byte (4096 at s = 2048), and the kernel keeps
    only its output and a per-row logsumexp: saved.
  * everything else (norms, rotary embedding, activation functions, residual adds, casts, softmax,
    dropout, the batched matmuls of eager attention): O(1) FLOPs per byte, memory-bound, cheap to
    re-run; eager attention's q k^T sums over the head dimension only (64-256) to produce b x heads
    x s x s scores, the largest tensors of a layer: recomputed, as Korthikanti et al. 2022 do.
`bmm` is therefore not in the list; MoE experts' grouped GEMM is (it is a projection over tokens).
"""

from __future__ import annotations

import functools
from contextlib import ExitStack, contextmanager

import torch
from torch import nn
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

_aten = torch.ops.aten

# Names, not overloads: every overload of these ops is saved. The attention kernels are the ones SDPA
# dispatches to below autograd (CUDA's three fused kernels and the CPU flash kernel).
SAVED_OP_NAMES = (
    "mm", "addmm", "_grouped_mm",
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu",
)
SAVED_OPS = frozenset(getattr(_aten, name) for name in SAVED_OP_NAMES if hasattr(_aten, name))

RECOMPUTE_MODES = ("none", "selective", "full")


def sac_policy(ctx, op, *args, **kwargs) -> CheckpointPolicy:
    """Save the outputs of projections and fused attention kernels; re-run everything else."""
    packet = getattr(op, "overloadpacket", op)
    return CheckpointPolicy.MUST_SAVE if packet in SAVED_OPS else CheckpointPolicy.PREFER_RECOMPUTE


def selective_contexts():
    """`context_fn` of torch.utils.checkpoint for the selective mode: SAC under `sac_policy`."""
    return create_selective_checkpoint_contexts(sac_policy)


def context_fn_for(mode: str, extra=None):
    """The checkpoint `context_fn` of a recompute mode, or None for `full` without extra contexts.

    `extra`, a context_fn of its own (the tracer's CUDA-semantics mode), is entered around SAC's
    modes in both the forward and the re-run."""
    if mode not in ("selective", "full"):
        raise ValueError(f"no checkpoint contexts for recompute mode {mode!r}; choose selective or full")
    own = selective_contexts if mode == "selective" else None
    if extra is None:
        return own
    if own is None:
        return extra
    return functools.partial(_combined, extra, own)


def _combined(outer, inner):
    outer_fwd, outer_re = outer()
    inner_fwd, inner_re = inner()
    return _both(outer_fwd, inner_fwd), _both(outer_re, inner_re)


@contextmanager
def _both(first, second):
    with ExitStack() as stack:
        stack.enter_context(first)
        stack.enter_context(second)
        yield


def enable_recompute(model: nn.Module, mode: str, extra_context_fn=None) -> None:
    """Checkpoint every decoder layer of a Hugging Face model under `mode` (none: nothing to do).

    transformers wraps each decoder layer's call in torch.utils.checkpoint with these kwargs
    (non-reentrant, so SAC's dispatch modes apply)."""
    if mode not in RECOMPUTE_MODES:
        raise ValueError(f"unknown recompute mode {mode!r}; choose one of: {', '.join(RECOMPUTE_MODES)}")
    if mode == "none":
        return
    kwargs = {"use_reentrant": False}
    context_fn = context_fn_for(mode, extra_context_fn)
    if context_fn is not None:
        kwargs["context_fn"] = context_fn
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.x name
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    model.config.use_cache = False

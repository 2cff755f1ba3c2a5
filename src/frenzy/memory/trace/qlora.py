"""QLoRA's frozen NF4 base projections, represented by their memory (bitsandbytes cannot run here).

A bitsandbytes `Linear4bit` (NF4, double quantisation, Dettmers et al. 2023) stores per weight of
n elements: n/2 packed uint8 codes, one uint8 absmax per 64-element block, one fp32 absmax per 256
of those blocks plus an fp32 offset, and a 16-entry fp32 NF4 code table; the 256-entry fp32 dynamic
map that decodes the absmax is shared by all modules. Its forward casts the input to the compute
dtype and calls `MatMul4Bit`, which dequantises the weight into a compute-dtype temporary (via an
fp32 absmax temporary), multiplies, and saves only the packed weight: backward dequantises again.

`Nf4Linear` reproduces those tensors (sizes and dtypes, not values) and that autograd behaviour.
Its dequantised copies are dtype casts of the packed weight, so the recorder files them under
weights, as MARP does.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

NF4_BLOCK = 64  # elements per first-level absmax
NESTED_BLOCK = 256  # first-level absmax values per second-level fp32 absmax


class _Nf4Matmul(torch.autograd.Function):
    """y = x W^T + b with W dequantised on the fly; saves the packed codes only (bnb MatMul4Bit)."""

    @staticmethod
    def forward(ctx, x, packed, module, bias):
        ctx.module = module
        ctx.save_for_backward(packed)
        return F.linear(x, module.dequantize(), bias)

    @staticmethod
    def backward(ctx, grad_output):
        (packed,) = ctx.saved_tensors
        weight = ctx.module.dequantize()
        return grad_output.matmul(weight.to(grad_output.dtype)), None, None, None


class Nf4Linear(nn.Module):
    """Frozen NF4 projection with bitsandbytes' storage and autograd footprint."""

    def __init__(self, in_features: int, out_features: int, bias: torch.Tensor | None,
                 compute_dtype: torch.dtype, dynamic_map: torch.Tensor) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.compute_dtype = compute_dtype
        n = in_features * out_features
        blocks = -(-n // NF4_BLOCK)
        self.register_buffer("packed", torch.empty(-(-n // 2), 1, dtype=torch.uint8))
        self.register_buffer("absmax", torch.empty(blocks, dtype=torch.uint8))
        self.register_buffer("absmax2", torch.empty(-(-blocks // NESTED_BLOCK), dtype=torch.float32))
        self.register_buffer("offset", torch.empty((), dtype=torch.float32))
        self.register_buffer("code", torch.empty(16, dtype=torch.float32))
        self.register_buffer("dynamic_map", dynamic_map)  # shared: the recorder counts it once
        self.bias = None if bias is None else nn.Parameter(bias.detach(), requires_grad=False)

    @classmethod
    def replace(cls, module: nn.Module, compute_dtype: torch.dtype, dynamic_map: torch.Tensor) -> Nf4Linear:
        """An Nf4Linear for an nn.Linear (weight out x in) or a transformers Conv1D (weight in x out)."""
        out_f, in_f = module.weight.shape
        if type(module).__name__ == "Conv1D":
            in_f, out_f = out_f, in_f
        return cls(in_f, out_f, module.bias, compute_dtype, dynamic_map)

    def dequantize(self) -> torch.Tensor:
        """The compute-dtype weight, built by casts of the packed buffers (bnb dequantize_4bit)."""
        n = self.in_features * self.out_features
        _absmax = self.absmax.to(torch.float32)  # nested absmax decoded to fp32 first
        codes = self.packed.expand(-1, 2).to(self.compute_dtype)  # two 4-bit codes per byte
        del _absmax
        return codes.view(-1)[:n].view(self.out_features, self.in_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        input_dtype = x.dtype
        x = x.to(self.compute_dtype)
        bias = None if self.bias is None else self.bias.to(self.compute_dtype)
        return _Nf4Matmul.apply(x, self.packed, self, bias).to(input_dtype)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, nf4, compute={self.compute_dtype}"


def dynamic_map() -> torch.Tensor:
    """bitsandbytes' 256-entry fp32 dynamic quantisation map (one per device, shared)."""
    return torch.empty(256, dtype=torch.float32)


def quantize_base_layers(model: nn.Module, compute_dtype: torch.dtype) -> int:
    """Replace every frozen Linear/Conv1D except the LM head (and LoRA's own adapters) by an
    Nf4Linear, as bitsandbytes' 4-bit loading does; returns how many were replaced. Like transformers'
    `replace_with_bnb_linear`, only plain nn.Linear modules count: a subclass with its own forward
    (PhiMoE's router) stays 16-bit."""
    head = model.get_output_embeddings()
    shared = dynamic_map()
    targets = []
    for parent_name, parent in model.named_modules():
        for name, child in parent.named_children():
            if child is head or name.startswith("lora_") or "lora_" in parent_name.split(".")[-1]:
                continue
            if type(child) is nn.Linear or type(child).__name__ == "Conv1D":
                targets.append((parent, name, child))
    for parent, name, child in targets:
        setattr(parent, name, Nf4Linear.replace(child, compute_dtype, shared))
    return len(targets)

"""bf16 matrix products on a CPU that stands in for a GPU (the fake cluster).

A GPU multiplies bf16 matrices on its tensor cores: fp32 accumulation, the product rounded to bf16.
A CPU without bf16 units (AVX2 only) emulates a bf16 GEMM element by element instead; on such a
machine a 1024x1024 bf16 product took 2.5 s against 0.027 s in fp32, and a 19M-parameter bf16-mixed
job ran 40x slower than in fp32. So on the CPU the worker multiplies bf16 operands in fp32 and rounds
the product to bf16: the GPU's arithmetic on the CPU's fast path.

The mode is entered below the step's memory meter (frenzy.train.memory), which therefore sees a bf16
product, as a GPU would allocate it, and not the fp32 temporaries made here.
"""

from __future__ import annotations

import contextlib

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten
PRODUCTS = frozenset({aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default})


class Fp32Products(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in PRODUCTS and _plain_bf16(args):
            upcast = [a.float() if isinstance(a, torch.Tensor) else a for a in args]
            return func(*upcast, **kwargs).to(torch.bfloat16)
        return func(*args, **kwargs)


def _plain_bf16(args) -> bool:
    # Tensor subclasses (DTensor) dispatch to plain local tensors themselves; only plain bf16 CPU
    # operands are rewritten.
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    return all(type(t) is torch.Tensor and t.dtype == torch.bfloat16 and t.device.type == "cpu" for t in tensors)


def products_in_fp32(device: torch.device) -> contextlib.AbstractContextManager:
    """Around the training steps: on the CPU, bf16 products in fp32; on a GPU nothing."""
    return Fp32Products() if device.type == "cpu" else contextlib.nullcontext()

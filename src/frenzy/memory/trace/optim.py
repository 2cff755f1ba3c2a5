"""The optimizer of a training step, as it behaves on a GPU.

* adamw: `torch.optim.AdamW(foreach=True)`. foreach is passed explicitly: it is the CUDA default but
  not the CPU one (CPU defaults to the per-tensor loop, whose temporaries are one tensor at a time).
  Its `step` counters live on the host for non-capturable AdamW; the recorder drops them.
* adamw-fused: `torch.optim.AdamW(fused=True)` (runs on fake CPU; no temporaries, device steps).
* sgd: `torch.optim.SGD(momentum=0.9, foreach=True)`.
* adamw-8bit: bitsandbytes AdamW8bit is emulated by its memory: per parameter two uint8 states and
  one fp32 absmax per 256-element block each, fp32 states for tensors under 4096 elements
  (`min_8bit_size`), two shared 256-entry fp32 quantisation maps; the update is in place.
Only trainable parameters are given to the optimizer.
"""

from __future__ import annotations

import torch

from frenzy.core.training import Optimizer

LR = 1e-5
ADAM8BIT_BLOCK = 256
MIN_8BIT_SIZE = 4096


class AdamW8bitMemory(torch.optim.Optimizer):
    """bitsandbytes AdamW8bit's state layout with an in-place update (values are irrelevant)."""

    def __init__(self, params, lr: float = LR) -> None:
        super().__init__(params, dict(lr=lr))
        self._qmaps: tuple[torch.Tensor, torch.Tensor] | None = None

    def _init_state(self, p: torch.Tensor) -> dict:
        if self._qmaps is None:  # bnb's name2qmap: created on the first step, shared by all params
            self._qmaps = (torch.zeros(256, dtype=torch.float32), torch.zeros(256, dtype=torch.float32))
        if p.numel() < MIN_8BIT_SIZE:
            return {"state1": torch.zeros_like(p, dtype=torch.float32),
                    "state2": torch.zeros_like(p, dtype=torch.float32)}
        blocks = -(-p.numel() // ADAM8BIT_BLOCK)
        return {
            "state1": torch.zeros_like(p, dtype=torch.uint8),
            "state2": torch.zeros_like(p, dtype=torch.uint8),
            "absmax1": torch.zeros(blocks, dtype=torch.float32),
            "absmax2": torch.zeros(blocks, dtype=torch.float32),
            "qmap1": self._qmaps[0],
            "qmap2": self._qmaps[1],
        }

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if not self.state[p]:
                    self.state[p] = self._init_state(p)
                p.add_(p.grad, alpha=-group["lr"])  # the fused kernel allocates nothing


def build_optimizer(params: list[torch.nn.Parameter], kind: Optimizer) -> torch.optim.Optimizer:
    if not params:
        raise ValueError("no trainable parameters: nothing for the optimizer to update")
    match kind:
        case Optimizer.ADAMW:
            return torch.optim.AdamW(params, lr=LR, foreach=True)
        case Optimizer.ADAMW_FUSED:
            return torch.optim.AdamW(params, lr=LR, fused=True)
        case Optimizer.SGD:
            return torch.optim.SGD(params, lr=LR, momentum=0.9, foreach=True)
        case Optimizer.ADAMW_8BIT:
            return AdamW8bitMemory(params)
    raise ValueError(f"unsupported optimizer {kind}")


def host_state_keys(kind: Optimizer) -> frozenset[str]:
    """State entries that a GPU run keeps in host memory (not counted on the device)."""
    return frozenset({"step"}) if kind is Optimizer.ADAMW else frozenset()

"""What a plan's ZeRO stage shards over its data-parallel ranks, in words, read from the same rule
MARP's state formulas divide by (states.zero_divisor), so the words cannot drift from the bytes.

ZeRO (Rajbhandari et al., SC'20): stage 1 shards the optimizer state (and with it the fp32 master
weights of mixed precision), stage 2 also the gradients, stage 3 also the working weights. The
worker runs ZeRO >= 1 on FSDP2, which always reduce-scatters gradients: ZeRO-1 there shards the
gradients as well. For bf16-mixed (not QLoRA) ZeRO-1/2 run DeepSpeed's bf16 semantics
(MixedPrecisionMode.FSDP2_PARAM: bf16 working weights kept gathered from each layer's forward to its
backward over sharded fp32 masters, gradients and optimizer state); ZeRO-3 also reshards the working
weights after each layer's forward.
"""

from __future__ import annotations

from dataclasses import dataclass

from frenzy.core.plan import ParallelPlan
from frenzy.core.training import TrainingConfig, ZeroStage
from frenzy.memory.states import zero_divisor

ZERO_HELP = ("ZeRO stage over the dp ranks. 0: nothing sharded (DDP). 1: optimizer state (and fp32 master "
             "weights) sharded. 2: also gradients. 3: also the weights (FSDP full shard). bf16-mixed 1/2 run "
             "DeepSpeed's bf16 ZeRO-1/2 on FSDP2: fp32 masters, gradients and optimizer state sharded, bf16 "
             "working weights gathered from forward to backward (FSDP2 shards gradients at 1 too). Other "
             "precisions compute from the stored weights, which only 3 shards")


@dataclass(frozen=True, slots=True, kw_only=True)
class ZeroSharding:
    """Which model states one rank holds a 1/dp shard of, and which it holds whole."""

    stage: ZeroStage
    dp: int
    sharded: tuple[str, ...]
    whole: tuple[str, ...]
    note: str = ""

    def describe(self) -> str:
        if self.dp == 1:
            return "dp 1: nothing to shard; every state is whole on the GPU"
        parts = [f"ZeRO-{int(self.stage)} over dp {self.dp}"]
        if self.sharded:
            parts.append(f"sharded (1/{self.dp} per GPU): {', '.join(self.sharded)}")
        if self.whole:
            parts.append(f"whole on every GPU: {', '.join(self.whole)}")
        return "; ".join(parts) + (f" ({self.note})" if self.note else "")

    def to_json(self) -> dict:
        return {"stage": int(self.stage), "dp": self.dp, "sharded": list(self.sharded), "whole": list(self.whole),
                "note": self.note}


def zero_sharding(training: TrainingConfig, plan: ParallelPlan) -> ZeroSharding:
    """The states `plan` shards for `training`, as states.zero_divisor divides their bytes."""
    master = "fp32 master weights" if training.precision.is_mixed else ""
    states = [("optimizer state", zero_divisor(plan, ZeroStage.OPTIMIZER)),
              ("gradients", zero_divisor(plan, ZeroStage.GRADIENTS))]
    note = ""
    if plan.fsdp_param_dtype:
        states.append((master, zero_divisor(plan, ZeroStage.OPTIMIZER)))
        keep = ("of one layer at a time" if plan.zero >= ZeroStage.PARAMETERS
                else "of every layer from its forward to its backward")
        states.append((f"bf16 working weights ({keep}, gathered)", 1))
        if plan.zero is ZeroStage.OPTIMIZER:
            note = "FSDP2 reduce-scatters gradients, so ZeRO-1 shards them as ZeRO-2 does"
    else:  # autocast and the pure precisions compute from the stored weights themselves
        stored = "fp32 weights (autocast casts them per matmul)" if master else "weights"
        states.append((stored, zero_divisor(plan, ZeroStage.PARAMETERS)))
        if plan.dp > 1 and plan.zero in (ZeroStage.OPTIMIZER, ZeroStage.GRADIENTS):
            note = ("counted as DeepSpeed's stage; the worker runs it on FSDP2, which also shards gradients at "
                    "ZeRO-1 and keeps the weights gathered from forward to backward over 1/dp shards (not traced)")
    sharded = tuple(name for name, divisor in states if name and divisor > 1)
    whole = tuple(name for name, divisor in states if name and divisor == 1)
    return ZeroSharding(stage=plan.zero, dp=plan.dp, sharded=sharded, whole=whole, note=note)

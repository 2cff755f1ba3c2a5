"""A parallel plan: how one job is laid out over GPUs of one type."""

from __future__ import annotations

from dataclasses import dataclass

from frenzy.core.training import Recompute, ZeroStage


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelPlan:
    """dp x tp x pp GPUs, the ZeRO stage of the data-parallel group, and the micro-batch per GPU.

    `grad_accum` micro-batches are accumulated per optimizer step, so the global batch is
    micro_batch x grad_accum x dp.
    """

    dp: int = 1
    tp: int = 1
    pp: int = 1
    zero: ZeroStage = ZeroStage.NONE
    micro_batch: int = 1
    grad_accum: int = 1
    recompute: Recompute = Recompute.NONE
    sequence_parallel: bool = False

    def __post_init__(self):
        for name in ("dp", "tp", "pp", "micro_batch", "grad_accum"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.sequence_parallel and self.tp == 1:
            raise ValueError("sequence parallelism needs tensor parallelism (tp > 1)")
        if self.zero > ZeroStage.NONE and self.dp == 1:
            # Sharding over one rank is a no-op; keep plans canonical so they compare equal.
            object.__setattr__(self, "zero", ZeroStage.NONE)

    @property
    def num_gpus(self) -> int:
        return self.dp * self.tp * self.pp

    @property
    def global_batch(self) -> int:
        return self.micro_batch * self.grad_accum * self.dp

    def describe(self) -> str:
        parts = [f"dp{self.dp}"]
        if self.tp > 1:
            parts.append(f"tp{self.tp}" + ("+sp" if self.sequence_parallel else ""))
        if self.pp > 1:
            parts.append(f"pp{self.pp}")
        if self.zero:
            parts.append(f"zero{int(self.zero)}")
        parts.append(f"mb{self.micro_batch}x{self.grad_accum}")
        if self.recompute:
            parts.append(f"rc-{self.recompute.name.lower()}")
        return " ".join(parts)

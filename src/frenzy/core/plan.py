"""A parallel plan: how one job is laid out over GPUs of one type."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from frenzy.core.training import Method, Precision, Recompute, TrainingConfig, ZeroStage


class MixedPrecisionMode(Enum):
    """How a *-mixed job computes in 16 bits over fp32 master weights.

    AUTOCAST: fp32 parameters everywhere, matmuls under torch.autocast (a 16-bit copy per weight,
    fp32 residual stream and norms). FSDP2_PARAM: FSDP2's MixedPrecisionPolicy(param_dtype=bf16,
    reduce_dtype=fp32): fp32 sharded masters and optimizer state, each layer's parameters
    all-gathered in bf16 for compute (no autocast, so the model runs as in pure bf16), bf16
    unsharded gradients cast to fp32 for the reduce-scatter, fp32 sharded gradients. Only for
    bf16-mixed on plans the worker wraps with FSDP2 (dp > 1, ZeRO >= 1): fp16 parameters would
    need a sharded gradient scaler the worker does not run, and QLoRA's packed NF4 weights are not
    parameters the policy can cast.
    """

    AUTOCAST = "autocast"
    FSDP2_PARAM = "fsdp2-param"

    @classmethod
    def parse(cls, value: "str | MixedPrecisionMode") -> "MixedPrecisionMode":
        if isinstance(value, cls):
            return value
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"unknown mixed-precision mode {value!r}; use one of "
                             f"{', '.join(m.value for m in cls)}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelPlan:
    """dp x tp x pp GPUs, the ZeRO stage of the data-parallel group, and the micro-batch per GPU.

    `grad_accum` micro-batches are accumulated per optimizer step, so the global batch is
    micro_batch x grad_accum x dp. `mixed_precision` says how a *-mixed job computes in 16 bits
    (MixedPrecisionMode: autocast, or FSDP2's bf16 parameter all-gather on FSDP2-sharded plans).
    """

    dp: int = 1
    tp: int = 1
    pp: int = 1
    zero: ZeroStage = ZeroStage.NONE
    micro_batch: int = 1
    grad_accum: int = 1
    recompute: Recompute = Recompute.NONE
    sequence_parallel: bool = False
    mixed_precision: MixedPrecisionMode = MixedPrecisionMode.AUTOCAST

    def __post_init__(self):
        for name in ("dp", "tp", "pp", "micro_batch", "grad_accum"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.sequence_parallel and self.tp == 1:
            raise ValueError("sequence parallelism needs tensor parallelism (tp > 1)")
        if self.zero > ZeroStage.NONE and self.dp == 1:
            # Sharding over one rank is a no-op; keep plans canonical so they compare equal.
            object.__setattr__(self, "zero", ZeroStage.NONE)
            object.__setattr__(self, "mixed_precision", MixedPrecisionMode.AUTOCAST)
        if self.fsdp_param_dtype and self.zero is ZeroStage.NONE:
            raise ValueError("the fsdp2-param mixed-precision mode needs FSDP2 sharding: dp > 1 with ZeRO >= 1")

    def varied(self, *, micro_batch: int | None = None, grad_accum: int | None = None,
               mixed_precision: MixedPrecisionMode | None = None) -> "ParallelPlan":
        """This plan with the given fields changed, as dataclasses.replace would give it, built
        directly: plan enumeration calls this in its inner loop, where replace's introspection costs
        more than an estimate's own arithmetic."""
        return ParallelPlan(dp=self.dp, tp=self.tp, pp=self.pp, zero=self.zero, recompute=self.recompute,
                            sequence_parallel=self.sequence_parallel,
                            micro_batch=self.micro_batch if micro_batch is None else micro_batch,
                            grad_accum=self.grad_accum if grad_accum is None else grad_accum,
                            mixed_precision=self.mixed_precision if mixed_precision is None else mixed_precision)

    @property
    def fsdp_param_dtype(self) -> bool:
        """Whether parameters are all-gathered in bf16 by FSDP2's MixedPrecisionPolicy (no autocast)."""
        return self.mixed_precision is MixedPrecisionMode.FSDP2_PARAM

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
        if self.fsdp_param_dtype:
            parts.append("mp-fsdp2")
        return " ".join(parts)


def check_mixed_precision(training: TrainingConfig, plan: ParallelPlan) -> None:
    """Raise a ValueError saying what to change when the plan's mixed-precision mode cannot run the
    training settings (MixedPrecisionMode.FSDP2_PARAM: bf16-mixed, full fine-tuning or LoRA)."""
    if not plan.fsdp_param_dtype:
        return
    if training.precision is not Precision.BF16_MIXED:
        raise ValueError(f"the fsdp2-param mode runs bf16-mixed only, not {training.precision.value} (fp16 "
                         "parameters would need a sharded gradient scaler); use autocast")
    if training.method is Method.QLORA:
        raise ValueError("the fsdp2-param mode does not run QLoRA (FSDP2 cannot cast packed NF4 weights); "
                         "use autocast")


def supports_fsdp_param_dtype(training: TrainingConfig, plan: ParallelPlan) -> bool:
    """Whether `plan` (its shape) could take MixedPrecisionMode.FSDP2_PARAM for these training settings
    (the worker runs FSDP2 without pipeline stages, so the planner offers it at pp 1)."""
    return (training.precision is Precision.BF16_MIXED and training.method is not Method.QLORA
            and plan.dp > 1 and plan.zero > ZeroStage.NONE and plan.pp == 1)

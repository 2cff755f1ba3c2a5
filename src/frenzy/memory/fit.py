"""Whether a plan fits a GPU: the one rule `frenzy plan`, `frenzy memory --gpu`, `GET /v1/plans`, the
control loop and the simulator all apply.

A plan fits a GPU type when the GPU computes in the job's dtype (the catalog's `supports_bf16`) and
the predicted `required_bytes` (allocated peak + CUDA runtime), scaled by the calibration factor
learnt for the type, is at most the GPU's memory less the safety margin. The margin covers what
MARP does not predict: allocator fragmentation that cannot be released and its residual error.
"""

from __future__ import annotations

from frenzy.core.gpu import GpuType
from frenzy.core.training import TrainingConfig
from frenzy.core.units import fmt_gib

DEFAULT_SAFETY_MARGIN = 0.05  # fraction of a GPU's memory left free beyond the predicted required bytes


def check_margin(margin: float) -> None:
    if not 0 <= margin < 1:
        raise ValueError(f"safety margin must be in [0, 1), got {margin}")


def usable_bytes(gpu: GpuType, margin: float = DEFAULT_SAFETY_MARGIN, factor: float = 1.0) -> int:
    """The bytes a plan may need on `gpu`: memory x (1 - margin) / factor. A calibration factor
    f > 1 (observed peaks above MARP's) is folded in here, so `required_bytes <= usable_bytes` reads
    as `required_bytes x f <= memory x (1 - margin)`."""
    return int(gpu.memory_bytes * (1 - margin) / factor)


def dtype_problem(training: TrainingConfig, gpu: GpuType) -> str | None:
    """Why `gpu` cannot compute in the job's dtype (None when it can): bf16 needs Ampere or newer,
    which the catalog records per type as `supports_bf16`."""
    if training.precision.needs_bf16 and not gpu.supports_bf16:
        return (f"{gpu.name} has no bf16 ({training.precision.value}); use --precision fp16-mixed or fp32, "
                "or a GPU type with bf16")
    return None


def fit_problem(training: TrainingConfig, required_bytes: int, gpu: GpuType,
                margin: float = DEFAULT_SAFETY_MARGIN, factor: float = 1.0) -> str | None:
    """None when a plan needing `required_bytes` per GPU fits `gpu`; otherwise why not."""
    dtype = dtype_problem(training, gpu)
    if dtype:
        return dtype
    usable = usable_bytes(gpu, margin, factor)
    if required_bytes <= usable:
        return None
    scaled = f" x {factor:.2f} calibration" if factor != 1.0 else ""
    return (f"needs {fmt_gib(required_bytes)}{scaled}; {gpu.name} has {fmt_gib(usable)} usable "
            f"({fmt_gib(gpu.memory_bytes)} less the {margin:.0%} safety margin)")

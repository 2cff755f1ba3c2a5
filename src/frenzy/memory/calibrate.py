"""Learn a bounded correction to MARP from observed peaks, per (model family, GPU type).

Why a factor and not a new formula: what MARP misses on a live system (allocator fragmentation,
a framework buffer, a kernel's workspace) scales roughly with the step's footprint, and is
specific to the software stack on one GPU type. So each (family, GPU type) keeps one multiplicative
factor on the predicted device bytes:

    ratio_i   = observed_peak_i / predicted_device_bytes_i          (one sample per finished attempt)
    factor    = clamp(EWMA(ratio), MIN_FACTOR, MAX_FACTOR),   EWMA weight max(1/n, ALPHA)

Bounds: MIN_FACTOR = 0.90 (a pessimistic MARP can be trusted only 10% tighter, and the planner's
5% safety margin still applies), MAX_FACTOR = 1.50 (beyond that MARP is wrong for the family and
the plans should be fixed, not padded). An OOM sample is a lower bound on the true peak, so it only
ever raises the factor. Planning with a factor f keeps a plan only if predicted x f still fits the
usable memory of its GPU type.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from frenzy.memory.plans import PlanChoice

MIN_FACTOR = 0.90
MAX_FACTOR = 1.50
ALPHA = 0.3  # weight of a new sample once several exist: recent software-stack changes dominate


@dataclass(frozen=True, slots=True, kw_only=True)
class Correction:
    family: str
    gpu_type: str
    factor: float = 1.0
    samples: int = 0

    def __post_init__(self):
        if not MIN_FACTOR <= self.factor <= MAX_FACTOR:
            raise ValueError(f"correction factor {self.factor} outside [{MIN_FACTOR}, {MAX_FACTOR}]")


def clamp_factor(value: float) -> float:
    return min(MAX_FACTOR, max(MIN_FACTOR, value))


def observe(correction: Correction, predicted_bytes: int, observed_bytes: int, *, oom: bool = False) -> Correction:
    """Fold one observed peak into the correction (see the module docstring for the rule)."""
    if predicted_bytes <= 0 or observed_bytes <= 0:
        return correction
    ratio = observed_bytes / predicted_bytes
    weight = max(1.0 / (correction.samples + 1), ALPHA)
    blended = (1 - weight) * correction.factor + weight * ratio
    if oom:  # the true peak was at least `observed`: never lower the factor, and cover this sample
        blended = max(correction.factor, ratio, blended)
    return replace(correction, factor=clamp_factor(blended), samples=correction.samples + 1)


def corrected_device_bytes(choice: PlanChoice, factor: float) -> int:
    return int(choice.memory.device_bytes * factor)


def apply(choices: Sequence[PlanChoice], factor_for) -> list[PlanChoice]:
    """Plans that still fit their GPU type once MARP's prediction is corrected.

    `factor_for(gpu_type_name) -> float` gives the correction for this job's family on that type.
    """
    return [c for c in choices if corrected_device_bytes(c, factor_for(c.gpu.name)) <= c.usable_bytes]

"""What really happens to a job's memory in the simulator: MARP's prediction times a seeded error.

The OOM rule (documented in docs/SIMULATOR.md): a job's true peak on a plan is MARP's predicted
peak (the `required_bytes` its planner checks against GPU memory) x (1 + e), with e drawn once per job from MARP's measured error distribution. A job
placed where its true peak exceeds the GPU's memory fails after its start-up time and is resubmitted.
Frenzy plans with a safety margin that covers the distribution's bound, so it never hits this.
"""

from __future__ import annotations

import numpy as np

# MARP's relative error of the predicted peak. Measured on an H100 (docs/ACCURACY.md#measured-h100,
# 51 single-GPU configurations): what decides a fit, `required_bytes`, is off the measured need
# (allocated peak + CUDA context) by a standard deviation of 0.23% and at most 0.9%; against the
# fake-tensor trace the allocated peak is off by at most 0.64% over 70 configurations. Multi-GPU
# plans add terms no GPU run has measured yet (NCCL and FSDP buffers), so the simulator draws from a
# distribution about four times wider: N(0, 1%) truncated at +/-3%.
MARP_ERROR_SD = 0.01
MARP_ERROR_BOUND = 0.03


def draw_peak_error(rng: np.random.Generator) -> float:
    """One relative error e ~ N(0, MARP_ERROR_SD) truncated to [-BOUND, +BOUND] (rejection sampling)."""
    while True:
        e = rng.normal(0.0, MARP_ERROR_SD)
        if abs(e) <= MARP_ERROR_BOUND:
            return float(e)


def true_peak_bytes(predicted_bytes: int, error: float) -> int:
    """The peak the job really reaches: prediction x (1 + e)."""
    return int(predicted_bytes * (1.0 + error))


def planning_margin() -> float:
    """Safety margin (fraction of GPU memory) that makes any prediction within the error bound safe:
    predicted <= (1 - m) x memory and true <= predicted x (1 + bound) give true <= memory when
    m = 1 - 1 / (1 + bound)."""
    return 1.0 - 1.0 / (1.0 + MARP_ERROR_BOUND)

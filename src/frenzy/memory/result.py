"""The shape every memory figure takes, predicted (MARP) or traced (memory.trace)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

# Breakdown components at the peak, in this order everywhere (tables, JSON, comparisons).
COMPONENTS = (
    "weights",
    "gradients",
    "optimizer_state",
    "activations",
    "logits_loss",
    "temporaries",
    "allocator_overhead",  # reserved - allocated: caching-allocator rounding and fragmentation
    "runtime_overhead",  # device - reserved: CUDA context, kernels, cuBLAS workspace, NCCL buffers
)


class Phase(Enum):
    FORWARD = "forward"
    BACKWARD = "backward"
    OPTIMIZER = "optimizer"


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryEstimate:
    """Per-GPU peak memory of one training step (the second: optimizer state alive).

    allocated_bytes ~ torch.cuda.max_memory_allocated, reserved_bytes ~ max_memory_reserved,
    device_bytes ~ what nvidia-smi shows for the process.
    """

    allocated_bytes: int
    reserved_bytes: int
    device_bytes: int
    breakdown: dict[str, int] = field(hash=False)
    peak_phase: Phase
    source: str = "formula"  # "formula" or "trace"

    def __post_init__(self):
        unknown = set(self.breakdown) - set(COMPONENTS)
        if unknown:
            raise ValueError(f"unknown breakdown components {sorted(unknown)}")
        if not self.allocated_bytes <= self.reserved_bytes <= self.device_bytes:
            raise ValueError("expected allocated <= reserved <= device bytes")

    @property
    def required_bytes(self) -> int:
        """What a GPU must hold for the step to succeed: live tensors plus the CUDA runtime. The
        allocator's cached slack is not required — on a failed cudaMalloc PyTorch releases cached
        blocks and retries before raising out-of-memory; the planner's safety margin covers the
        fragmentation that cannot be released."""
        return self.allocated_bytes + self.breakdown.get("runtime_overhead", 0)

    def to_json(self) -> dict:
        return {
            "allocated_bytes": self.allocated_bytes,
            "reserved_bytes": self.reserved_bytes,
            "device_bytes": self.device_bytes,
            "breakdown": {name: int(self.breakdown.get(name, 0)) for name in COMPONENTS},
            "required_bytes": self.required_bytes,
            "peak_phase": self.peak_phase.value,
            "source": self.source,
        }

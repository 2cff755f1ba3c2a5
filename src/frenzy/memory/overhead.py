"""Memory outside the tensors a training step allocates: allocator slack and the CUDA runtime."""

from __future__ import annotations

from frenzy.core.gpu import GpuType
from frenzy.core.plan import ParallelPlan
from frenzy.core.units import MiB, round_up

# The caching allocator rounds every block to 512 B and carves blocks out of 2 MiB (small) or
# 20 MiB / 2 MiB-rounded (large) segments it keeps; freed blocks are reused only when a request
# fits, so transient tensors of changing sizes leave cached slack. Slack as a fraction of the
# transient bytes at the peak (activations, logits, temporaries): the median over the validation
# matrix's allocator replays (memory.trace), which ranged 0.02-1.3 (docs/ACCURACY.md). It sets
# max_memory_reserved; it does not decide fits, because PyTorch frees cached blocks and retries
# before it raises an out-of-memory error.
ALLOCATOR_SLACK_OF_TRANSIENT = 0.28
ALLOCATOR_SEGMENT_BYTES = 20 * MiB

# CUDA context, kernel images and cuBLAS/cuDNN handles of a PyTorch process with lazy module
# loading (CUDA 12): ~0.5 GiB on Ampere/Hopper; NCCL adds channel buffers per communicator.
CUDA_CONTEXT_BYTES = 520 * MiB
NCCL_BYTES_PER_GROUP = 256 * MiB


def allocator_overhead_bytes(allocated_bytes: int, transient_bytes: int) -> int:
    """reserved - allocated: slack over transient tensors, at least one spare segment."""
    slack = int(ALLOCATOR_SLACK_OF_TRANSIENT * transient_bytes) + ALLOCATOR_SEGMENT_BYTES
    return round_up(allocated_bytes + slack, 2 * MiB) - allocated_bytes


def runtime_overhead_bytes(plan: ParallelPlan, gpu: GpuType | None = None) -> int:
    """device - reserved: CUDA context plus NCCL buffers for each communicator wider than one rank."""
    groups = sum(1 for degree in (plan.dp, plan.tp, plan.pp) if degree > 1)
    return CUDA_CONTEXT_BYTES + groups * NCCL_BYTES_PER_GROUP

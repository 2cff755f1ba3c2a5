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

# CUDA context, kernel images and library handles of a PyTorch training process, outside the caching
# allocator: NVML's per-process memory minus max_memory_reserved, measured on an H100 (torch 2.11,
# CUDA 13, lazy module loading) after two training steps: 758 MiB on every row of
# tests/data/gpu_memory_h100.csv that ran SDPA, 742 MiB on the eager-attention rows.
CUDA_CONTEXT_BYTES = 758 * MiB
# cuBLAS workspaces, which PyTorch takes from its caching allocator (so max_memory_allocated shows
# them): 32 MiB per (handle, stream) on Hopper, and a training step uses two handles, forward on the
# Python thread and backward on autograd's device thread. Measured: a bf16 matmul allocates 32 MiB
# beside its output, and the H100 rows sit 64-83 MiB above the fake-tensor trace, which has no
# cuBLAS. Booked here rather than in the tensor terms, which the trace checks; older GPUs use 8 MiB
# per workspace, so this is an upper bound there.
CUBLAS_WORKSPACES_BYTES = 2 * 32 * MiB
NCCL_BYTES_PER_GROUP = 256 * MiB


def allocator_overhead_bytes(allocated_bytes: int, transient_bytes: int) -> int:
    """reserved - allocated: slack over transient tensors, at least one spare segment."""
    slack = int(ALLOCATOR_SLACK_OF_TRANSIENT * transient_bytes) + ALLOCATOR_SEGMENT_BYTES
    return round_up(allocated_bytes + slack, 2 * MiB) - allocated_bytes


def runtime_overhead_bytes(plan: ParallelPlan, gpu: GpuType | None = None) -> int:
    """Memory beside the step's tensors: CUDA context, cuBLAS workspaces, and NCCL buffers for each
    communicator wider than one rank."""
    groups = sum(1 for degree in (plan.dp, plan.tp, plan.pp) if degree > 1)
    return CUDA_CONTEXT_BYTES + CUBLAS_WORKSPACES_BYTES + groups * NCCL_BYTES_PER_GROUP

"""Communication and scheduling overheads of a parallel plan, one formula per function.

Collective costs use the ring (bandwidth-optimal) algorithm of Patarasuk & Yuan 2009 as NCCL does
for large messages: all-reduce moves 2(n-1)/n of the buffer over the slowest link, reduce-scatter
and all-gather (n-1)/n each, plus a per-hop latency.
"""

from __future__ import annotations

from frenzy.core.training import Optimizer, Precision, Recompute

COLLECTIVE_HOP_LATENCY_S = 8e-6  # NCCL per-step latency on NVLink/PCIe/IB, order of magnitude
# Fraction of a backward pass's compute that gradient communication can hide behind (DDP buckets,
# FSDP prefetch); the rest is exposed. PyTorch DDP paper (Li et al. 2020) reports most but not all
# of the all-reduce overlapping with backward.
DP_OVERLAP_FRACTION = 0.8
BACKWARD_SHARE_OF_COMPUTE = 2.0 / 3.0  # backward is 4N of the 6N FLOPs per token
HOST_LINK_BANDWIDTH_BYTES_S = 16e9  # PCIe Gen3/4 x16 effective, for CPU offload


def ring_all_reduce_seconds(num_bytes: float, ranks: int, bandwidth_bytes_s: float) -> float:
    """2(n-1)/n x bytes / bandwidth + 2(n-1) hop latencies; zero for a single rank."""
    if ranks <= 1 or num_bytes <= 0:
        return 0.0
    return 2 * (ranks - 1) / ranks * num_bytes / bandwidth_bytes_s + 2 * (ranks - 1) * COLLECTIVE_HOP_LATENCY_S


def ring_gather_or_scatter_seconds(num_bytes: float, ranks: int, bandwidth_bytes_s: float) -> float:
    """All-gather or reduce-scatter of a `num_bytes` (unsharded) buffer: (n-1)/n x bytes / bandwidth."""
    if ranks <= 1 or num_bytes <= 0:
        return 0.0
    return (ranks - 1) / ranks * num_bytes / bandwidth_bytes_s + (ranks - 1) * COLLECTIVE_HOP_LATENCY_S


def tensor_parallel_seconds_per_micro_batch(tokens: int, hidden: int, layers: int, tp: int, compute_bytes: int,
                                            recompute: Recompute, bandwidth_bytes_s: float) -> float:
    """Megatron tensor parallelism: 2 all-reduces of the (tokens x hidden) activations per layer in
    forward and 2 in backward (Shoeybi et al. 2019, fig. 4), 2 more when the forward is recomputed.
    Sequence parallelism swaps each for a reduce-scatter + all-gather of equal volume (Korthikanti
    et al. 2022). Not overlapped with compute (exposed on the critical path). Selective recomputation
    re-runs them as full does: collectives are not in its saved-op policy (frenzy.train.recompute)."""
    per_layer = 4 + (2 if recompute.checkpoints_layers else 0)
    return per_layer * layers * ring_all_reduce_seconds(tokens * hidden * compute_bytes, tp, bandwidth_bytes_s)


def pipeline_p2p_seconds_per_micro_batch(tokens: int, hidden: int, pp: int, compute_bytes: int,
                                         bandwidth_bytes_s: float) -> float:
    """A stage sends its output activations forward and receives their gradient back: 2 x tokens x
    hidden x bytes per micro-batch over the link between stages (zero without pipelining)."""
    if pp <= 1:
        return 0.0
    return 2 * tokens * hidden * compute_bytes / bandwidth_bytes_s + 2 * COLLECTIVE_HOP_LATENCY_S


def pipeline_bubble_fraction(pp: int, micro_batches: int) -> float:
    """1F1B idle time relative to the useful work: (pp - 1) / m (Narayanan et al. 2021, section 2.2)."""
    return (pp - 1) / micro_batches


def gradient_sync_seconds(grad_bytes: float, dp: int, zero: int, bandwidth_bytes_s: float) -> tuple[float, bool]:
    """Data-parallel gradient traffic and whether it repeats every micro-batch.

    ZeRO 0/1 (DDP): one all-reduce per optimizer step (no_sync during accumulation). ZeRO 2/3
    (DeepSpeed, FSDP): a reduce-scatter after every micro-batch's backward.
    """
    if zero >= 2:
        return ring_gather_or_scatter_seconds(grad_bytes, dp, bandwidth_bytes_s), True
    return ring_all_reduce_seconds(grad_bytes, dp, bandwidth_bytes_s), False


def parameter_gather_seconds_per_micro_batch(param_bytes: float, dp: int, recompute: Recompute,
                                             bandwidth_bytes_s: float) -> float:
    """ZeRO-3 / FSDP full shard: all-gather the weights before forward and again before backward
    (and once more for a recomputed forward) in every micro-batch (Rajbhandari et al. 2020)."""
    gathers = 3 if recompute.checkpoints_layers else 2
    return gathers * ring_gather_or_scatter_seconds(param_bytes, dp, bandwidth_bytes_s)


def fsdp_param_dtype_seconds_per_micro_batch(params: int, trainable: int, dp: int, zero: int, recompute: Recompute,
                                             bandwidth_bytes_s: float) -> float:
    """FSDP2 with MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32), per micro-batch: every
    parameter (a frozen base too) all-gathered in bf16, 2 B each, before forward, and under ZeRO-3
    again before backward (and for a recomputed forward); ZeRO-1/2 keep the forward's gather for
    backward. Gradients are reduce-scattered in fp32, 4 B each, after every micro-batch's backward.
    Against autocast's ZeRO-3 this halves nothing (autocast's plans are priced with gathers in the
    compute dtype already) but doubles the reduce-scatter bytes; against ZeRO-1/2 it adds the gathers."""
    if zero >= 3:
        gathers = parameter_gather_seconds_per_micro_batch(2 * params, dp, recompute, bandwidth_bytes_s)
    else:
        gathers = ring_gather_or_scatter_seconds(2 * params, dp, bandwidth_bytes_s)
    return gathers + ring_gather_or_scatter_seconds(4 * trainable, dp, bandwidth_bytes_s)


def exposed_seconds(comm_s: float, overlappable_compute_s: float) -> float:
    """Communication left on the critical path after hiding DP_OVERLAP_FRACTION of the compute."""
    return max(0.0, comm_s - DP_OVERLAP_FRACTION * overlappable_compute_s)


def optimizer_bytes_per_param(precision: Precision, optimizer: Optimizer) -> int:
    """HBM traffic of one optimizer update per parameter: read + write the weight (and its 16-bit
    copy under mixed precision), read the gradient, read + write each moment."""
    p = precision.param_bytes
    moments = {Optimizer.ADAMW: 2, Optimizer.ADAMW_FUSED: 2, Optimizer.ADAMW_8BIT: 2, Optimizer.SGD: 1}[optimizer]
    moment_bytes = 1 if optimizer is Optimizer.ADAMW_8BIT else p
    copy = 2 if precision.is_mixed else 0
    return 2 * p + p + 2 * moments * moment_bytes + copy


def optimizer_step_seconds(params_per_rank: float, precision: Precision, optimizer: Optimizer,
                           hbm_bandwidth_bytes_s: float) -> float:
    """The optimizer's update is memory-bound: params x optimizer_bytes_per_param / HBM bandwidth."""
    return params_per_rank * optimizer_bytes_per_param(precision, optimizer) / hbm_bandwidth_bytes_s


def offload_seconds(offloaded_bytes: float, bandwidth_bytes_s: float = HOST_LINK_BANDWIDTH_BYTES_S) -> float:
    """CPU offload (ZeRO-Offload): the offloaded states cross the host link down and back each step.
    Plans do not offload yet (ParallelPlan has no such field), so the step model passes 0 bytes."""
    return 2 * offloaded_bytes / bandwidth_bytes_s

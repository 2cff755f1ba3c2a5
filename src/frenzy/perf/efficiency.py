"""What fraction of a GPU's peak matmul throughput training actually achieves (hardware FLOPs
utilisation, HFU), and how fast the memory-bound remainder runs.

Calibrated on llm-foundry's published MPT training benchmarks (scripts/train/benchmarking/README.md,
bf16 FSDP on 8 GPUs, no activation checkpointing, so MFU = HFU): A100-80GB reaches 64% for the 7B
model at sequence 2048 and 45% for the 125M one; H100-80GB reaches 46% for the 7B. The comparison
against these and other published numbers is bench/perf_sanity.py's table in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import math

from frenzy.core.gpu import GpuType

# Large-GEMM HFU at or below the reference ridge point (A100: 312 TFLOP/s / 2.04 TB/s = 153 FLOP/B).
BASE_HFU = 0.71
REFERENCE_RIDGE_FLOP_PER_BYTE = 153.0
# GEMM shapes: a layer whose (tensor-parallel shard of the) hidden width is HIDDEN_HALF_EFFICIENCY
# reaches half of the large-GEMM rate; same for micro-batches of TOKENS_HALF_EFFICIENCY tokens.
HIDDEN_HALF_EFFICIENCY = 384
TOKENS_HALF_EFFICIENCY = 128
# Element-wise traffic (norms, activations, residuals, dropout, fwd + bwd) per token per layer, in
# hidden-width elements of the compute dtype; Korthikanti et al. 2022 count 34 bytes per hidden
# element stored per layer, each written once and read back at least once.
ELEMENTWISE_ELEMENTS_PER_HIDDEN = 48


def ridge_point(gpu: GpuType, flops_key: str) -> float:
    """Peak FLOP/s over HBM bytes/s: how many FLOPs per byte a kernel needs to be compute-bound."""
    return gpu.peak_flops_for(flops_key) / gpu.hbm_bandwidth_bytes_s


def peak_hfu(gpu: GpuType, flops_key: str) -> float:
    """Large-GEMM HFU of a GPU type: BASE_HFU, lowered by sqrt(reference ridge / ridge) above it.

    Assumption: GPUs whose tensor cores outrun their memory (H100: ridge 295 FLOP/B) keep them busy
    a smaller fraction of the time; the square root fits H100 vs A100 in llm-foundry's tables
    (46% vs 64% for MPT-7B). GPUs with a lower ridge are capped at BASE_HFU.
    """
    ridge = ridge_point(gpu, flops_key)
    return BASE_HFU * min(1.0, math.sqrt(REFERENCE_RIDGE_FLOP_PER_BYTE / ridge))


def gemm_shape_efficiency(hidden_per_rank: float, tokens_per_micro_batch: int) -> float:
    """Fraction of the large-GEMM rate reached by a layer of this width and micro-batch size:
    1 / (1 + H/h) / (1 + T/t). Small models and tensor-parallel shards run smaller, less efficient
    GEMMs (llm-foundry: MPT-125M at 45% vs MPT-7B at 64% HFU on A100)."""
    return 1.0 / (1.0 + HIDDEN_HALF_EFFICIENCY / hidden_per_rank) / (1.0 + TOKENS_HALF_EFFICIENCY / tokens_per_micro_batch)


def achievable_flops(gpu: GpuType, flops_key: str, hidden_per_rank: float, tokens_per_micro_batch: int) -> float:
    """FLOP/s the training step's matmuls sustain on one GPU: peak x peak_hfu x shape efficiency."""
    return (gpu.peak_flops_for(flops_key) * peak_hfu(gpu, flops_key)
            * gemm_shape_efficiency(hidden_per_rank, tokens_per_micro_batch))


def elementwise_seconds(tokens: int, hidden: int, layers: int, compute_bytes: int, gpu: GpuType) -> float:
    """Memory-bound element-wise work: tokens x layers x ELEMENTWISE_ELEMENTS_PER_HIDDEN x hidden x
    bytes, streamed at the GPU's HBM bandwidth (flash attention keeps scores on chip)."""
    traffic = tokens * layers * ELEMENTWISE_ELEMENTS_PER_HIDDEN * hidden * compute_bytes
    return traffic / gpu.hbm_bandwidth_bytes_s


# Attention that materialises its scores (eager, or SDPA's math fallback) streams every b x heads x
# s x s score through HBM several times: the QK^T product, its fp32 upcast and mask add, softmax,
# the 16-bit copy that multiplies v, and as much again in backward. Measured on an H100
# (tests/data/gpu_memory_h100.csv), eager rows take 99 and 115 B of traffic per score element more
# than their SDPA twins (Llama-2-7B LoRA mb1 s2048; GPT-2 mb8 s1024) at the catalog bandwidth.
SCORE_BYTES_PER_ELEMENT = 105
# The forward's part of that traffic, which recomputation runs a second time.
SCORE_FORWARD_SHARE = 1 / 3


def materialised_scores_seconds(tokens: int, heads: int, seq_len: int, layers: int, recomputes: bool,
                                gpu: GpuType) -> float:
    """HBM time of attention scores that are materialised: tokens x heads x seq per layer."""
    traffic = tokens * heads * seq_len * layers * SCORE_BYTES_PER_ELEMENT
    if recomputes:
        traffic *= 1 + SCORE_FORWARD_SHARE
    return traffic / gpu.hbm_bandwidth_bytes_s

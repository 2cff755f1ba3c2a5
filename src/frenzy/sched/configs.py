"""What a user of a non-serverless system runs on the GPUs they asked for, and how fast.

Baseline policies place a job on a (GPU type, count) "configuration" rather than on one of MARP's
plans. On a configuration the user picks the plan a practitioner would: data parallel (plain DDP or
FSDP/ZeRO-3), tensor parallel inside a node if needed, with or without activation checkpointing, the
largest micro-batch their memory estimate says fits, and of those the fastest (frenzy.perf). The
memory estimate is MARP's with no safety margin (`fits_predicted`): what profiling would report.
Whether the job really fits is the simulator's business (true peak = prediction x error).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from math import ceil

from frenzy.core import catalog
from frenzy.core.gpu import DEFAULT_INTER_NODE_BANDWIDTH_BYTES_S
from frenzy.core.job import JobSpec
from frenzy.core.plan import ParallelPlan
from frenzy.core.training import Recompute, ZeroStage
from frenzy.core.worker_support import unsupported_reason
from frenzy.memory.estimate import estimate
from frenzy.memory.plans import PlanChoice
from frenzy.perf.step import step_time

MAX_MICRO_BATCH = 64


def peak_bytes(memory) -> int:
    """The predicted peak a GPU must hold, as MARP's planner compares it with GPU memory
    (`required_bytes`: live tensors + CUDA runtime; the allocator's cache can be released)."""
    return getattr(memory, "required_bytes", memory.device_bytes)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigChoice:
    """The user's plan on `num_gpus` GPUs of one type, its predicted step time and memory verdict."""

    choice: PlanChoice
    step_time_s: float
    fits_predicted: bool  # MARP's prediction (no margin) fits the GPU's memory

    @property
    def num_gpus(self) -> int:
        return self.choice.num_gpus


def _powers_of_two(limit: int) -> list[int]:
    return [1 << i for i in range(max(limit, 1).bit_length()) if 1 << i <= limit]


def _candidate_shapes(spec: JobSpec, num_gpus: int, widest: int):
    arch = spec.model
    for tp in _powers_of_two(min(8, widest, num_gpus)):
        if num_gpus % tp or arch.num_heads % tp or arch.intermediate_size % tp:
            continue
        if arch.num_kv_heads % tp and tp % arch.num_kv_heads:
            continue
        dp = num_gpus // tp
        if spec.global_batch % dp:
            continue
        per_rank = spec.global_batch // dp
        micro = [m for m in _powers_of_two(min(per_rank, MAX_MICRO_BATCH)) if per_rank % m == 0]
        for zero in ([ZeroStage.NONE, ZeroStage.PARAMETERS] if dp > 1 else [ZeroStage.NONE]):
            for rc in (Recompute.NONE, Recompute.FULL):
                variants = ([ParallelPlan(dp=dp, tp=tp, zero=zero, recompute=rc, sequence_parallel=sp,
                                          micro_batch=m, grad_accum=per_rank // m) for m in micro]
                            for sp in ((True, False) if tp > 1 and spec.seq_len % tp == 0 else (False,)))
                plans = _runnable(spec, variants)
                if plans:
                    yield plans


def _runnable(spec: JobSpec, variants) -> list[ParallelPlan] | None:
    """The first variant (sequence parallel, then not) the training worker runs: a baseline's user
    runs Frenzy's worker too (core.worker_support)."""
    return next((plans for plans in variants if unsupported_reason(spec, plans[0]) is None), None)


def _largest_fitting(spec: JobSpec, plans: list[ParallelPlan], capacity: int):
    """Binary search over micro-batches (memory grows with the micro-batch): the largest that fits,
    or the smallest with its estimate when none does."""
    lo, hi, best = 0, len(plans) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        memory = estimate(spec, plans[mid])
        if peak_bytes(memory) <= capacity:
            best, lo = (plans[mid], memory), mid + 1
        else:
            hi = mid - 1
    if best is not None:
        return best, True
    return (plans[0], estimate(spec, plans[0])), False


def config_choice(spec: JobSpec, gpu_type: str, num_gpus: int, widest_node: int,
                  inter_node_bandwidth_bytes_s: float = DEFAULT_INTER_NODE_BANDWIDTH_BYTES_S) -> ConfigChoice | None:
    """The user's plan for `spec` on `num_gpus` GPUs of `gpu_type` (nodes of up to `widest_node`,
    linked at `inter_node_bandwidth_bytes_s`); None when the global batch admits no data-parallel
    split on that many GPUs."""
    return _config_choice(spec.model, spec.training, spec.seq_len, spec.global_batch, gpu_type, num_gpus,
                          widest_node, inter_node_bandwidth_bytes_s)


@lru_cache(maxsize=65536)  # keyed by job shape, not by job: traces reuse a few shapes many times
def _config_choice(model, training, seq_len, global_batch, gpu_type, num_gpus, widest, link) -> ConfigChoice | None:
    spec = JobSpec(model=model, training=training, seq_len=seq_len, global_batch=global_batch)
    gpu = replace(catalog.gpu_type(gpu_type), inter_node_bandwidth_bytes_s=link)
    if gpu.memory_bytes <= 0 or (training.precision.needs_bf16 and not gpu.supports_bf16):
        return None
    nodes = ceil(num_gpus / widest)
    best: tuple | None = None  # (fits, -speed key, plan, memory)
    for plans in _candidate_shapes(spec, num_gpus, widest):
        (plan, memory), fits = _largest_fitting(spec, plans, gpu.memory_bytes)
        seconds = step_time(spec, plan, gpu, nodes=nodes).total_s
        key = (not fits, seconds if fits else peak_bytes(memory))
        if best is None or key < best[0]:
            best = (key, plan, memory, seconds, fits)
    if best is None:
        return None
    _, plan, memory, seconds, fits = best
    choice = PlanChoice(gpu=gpu, plan=plan, memory=memory, usable_bytes=gpu.memory_bytes)
    return ConfigChoice(choice=choice, step_time_s=seconds, fits_predicted=fits)


def duration_s(spec: JobSpec, choice: PlanChoice, widest_node: int | None = None) -> float:
    """Predicted seconds of the job's steps under a plan (frenzy.perf), start-up excluded."""
    widest = widest_node or choice.gpu.gpus_per_node
    return spec.steps * step_time(spec, choice.plan, choice.gpu, nodes=ceil(choice.num_gpus / widest)).total_s

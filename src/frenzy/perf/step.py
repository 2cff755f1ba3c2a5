"""Step time of one parallel plan on one GPU type, composed from the per-term formulas.

A rank's optimizer step is: (grad_accum + pp - 1) micro-batch slots of its pipeline stage (1F1B;
the pp - 1 extra slots are the bubble), each = matmul compute + element-wise work + tensor-parallel
collectives + pipeline sends; plus the exposed part of data-parallel gradient/parameter traffic,
plus the optimizer update. Tensor parallelism always stays inside a node (the placement guarantees
it); data-parallel and pipeline traffic crosses nodes once the plan spans more than one.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import lru_cache
from math import ceil

from frenzy.core.gpu import GpuType
from frenzy.core.job import JobSpec
from frenzy.core.plan import ParallelPlan
from frenzy.core.training import Method, Recompute
from frenzy.memory.layer_inventory import Kernel, attention_kernel
from frenzy.memory.states import stage_params
from frenzy.perf import comm, efficiency, flops


@dataclass(frozen=True, slots=True, kw_only=True)
class StepTime:
    """Seconds per optimizer step on the slowest rank, by term (they add up to `total_s`)."""

    compute_s: float  # matmuls incl. recomputation, over the achievable FLOP/s
    elementwise_s: float  # memory-bound work (norms, activations; QLoRA dequantisation)
    tensor_parallel_s: float
    pipeline_p2p_s: float
    pipeline_bubble_s: float
    data_parallel_s: float  # exposed gradient sync / ZeRO-3 parameter gathers
    optimizer_s: float
    offload_s: float = 0.0
    tokens_per_step: int = 0
    num_gpus: int = 1

    def __post_init__(self):
        for f in fields(self):
            if getattr(self, f.name) < 0:
                raise ValueError(f"StepTime.{f.name} must be >= 0")

    @property
    def total_s(self) -> float:
        return (self.compute_s + self.elementwise_s + self.tensor_parallel_s + self.pipeline_p2p_s
                + self.pipeline_bubble_s + self.data_parallel_s + self.optimizer_s + self.offload_s)

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_step / self.total_s / self.num_gpus

    def to_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["total_s"] = self.total_s
        return out


def step_time(job: JobSpec, plan: ParallelPlan, gpu: GpuType, *, nodes: int | None = None,
              inter_node_bandwidth_bytes_s: float | None = None) -> StepTime:
    """Predicted seconds per optimizer step of `job` under `plan` on GPUs of type `gpu`.

    `nodes` is how many nodes the plan spans (default: as few as the type's node size allows);
    the network between them is the type's (`gpu.inter_node_bandwidth_bytes_s`) unless given.
    """
    if nodes is None:
        nodes = ceil(plan.num_gpus / gpu.gpus_per_node)
    if nodes < 1:
        raise ValueError(f"nodes must be >= 1, got {nodes}")
    if inter_node_bandwidth_bytes_s is None:
        inter_node_bandwidth_bytes_s = gpu.inter_node_bandwidth_bytes_s
    return _step_time(job.model, job.training, job.seq_len, plan, gpu, nodes, inter_node_bandwidth_bytes_s)


def job_duration_s(job: JobSpec, plan: ParallelPlan, gpu: GpuType, **kwargs) -> float:
    """Seconds to run all of the job's steps (start-up and checkpoint restores not included)."""
    return job.steps * step_time(job, plan, gpu, **kwargs).total_s


@lru_cache(maxsize=65536)  # the simulator asks for the same (shape, plan, GPU) many times
def _step_time(arch, training, seq_len: int, plan: ParallelPlan, gpu: GpuType, nodes: int,
               inter_bw: float) -> StepTime:
    precision = training.precision
    key, cbytes = precision.flops_key, precision.compute_bytes
    tokens = plan.micro_batch * seq_len
    layers = ceil(arch.num_layers / plan.pp)
    hidden_rank = arch.hidden_size / plan.tp

    hw_flops = flops.hardware_flops_per_token(arch, training, plan.recompute, seq_len) * tokens / (plan.tp * plan.pp)
    compute = hw_flops / efficiency.achievable_flops(gpu, key, hidden_rank, tokens)
    elementwise_width = hidden_rank if plan.sequence_parallel else arch.hidden_size
    elementwise = efficiency.elementwise_seconds(tokens, int(elementwise_width), layers, cbytes, gpu)
    params = stage_params(arch, training, plan, 0)
    if training.method is Method.QLORA:  # one 4-bit read + 16-bit write per frozen weight, fwd and bwd
        elementwise += 2 * params.frozen_linear * 2.5 / gpu.hbm_bandwidth_bytes_s
    if attention_kernel(arch, training) in (Kernel.EAGER, Kernel.MATH):
        elementwise += efficiency.materialised_scores_seconds(tokens, arch.num_heads // plan.tp, seq_len, layers,
                                                              plan.recompute is not Recompute.NONE, gpu)

    intra_bw = gpu.intra_node_bandwidth_bytes_s
    cross_bw = min(intra_bw, inter_bw) if nodes > 1 else intra_bw
    tp = comm.tensor_parallel_seconds_per_micro_batch(tokens, arch.hidden_size, layers, plan.tp, cbytes,
                                                      plan.recompute, intra_bw)
    stage_bw = cross_bw if plan.tp * plan.pp > gpu.gpus_per_node else intra_bw
    p2p = comm.pipeline_p2p_seconds_per_micro_batch(tokens, arch.hidden_size, plan.pp, cbytes, stage_bw)
    micro = compute + elementwise + tp + p2p

    grad_bytes = params.trainable * (cbytes if plan.zero >= 2 else precision.param_bytes)
    sync, every_micro = comm.gradient_sync_seconds(grad_bytes, plan.dp, int(plan.zero), cross_bw)
    backward = comm.BACKWARD_SHARE_OF_COMPUTE * compute
    if plan.fsdp_param_dtype:
        traffic = comm.fsdp_param_dtype_seconds_per_micro_batch(params.total, params.trainable, plan.dp,
                                                                int(plan.zero), plan.recompute, cross_bw)
        dp = plan.grad_accum * comm.exposed_seconds(traffic, compute)
    elif plan.zero >= 3:
        gathers = comm.parameter_gather_seconds_per_micro_batch(params.trainable * cbytes, plan.dp,
                                                                plan.recompute, cross_bw)
        dp = plan.grad_accum * comm.exposed_seconds(sync + gathers, compute)
    elif every_micro:
        dp = plan.grad_accum * comm.exposed_seconds(sync, backward)
    else:
        dp = comm.exposed_seconds(sync, backward)

    sharded = params.trainable / (plan.dp if plan.zero >= 1 else 1)
    optimizer = comm.optimizer_step_seconds(sharded, precision, training.optimizer, gpu.hbm_bandwidth_bytes_s)
    return StepTime(
        compute_s=compute * plan.grad_accum,
        elementwise_s=elementwise * plan.grad_accum,
        tensor_parallel_s=tp * plan.grad_accum,
        pipeline_p2p_s=p2p * plan.grad_accum,
        pipeline_bubble_s=micro * plan.grad_accum * comm.pipeline_bubble_fraction(plan.pp, plan.grad_accum),
        data_parallel_s=dp,
        optimizer_s=optimizer,
        offload_s=comm.offload_seconds(0),
        tokens_per_step=plan.global_batch * seq_len,
        num_gpus=plan.num_gpus,
    )

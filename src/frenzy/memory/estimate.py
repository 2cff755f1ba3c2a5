"""MARP: compose model states, activations and logits into the per-GPU peak of a training step.

The step is walked at the granularity where peaks can occur (second step, optimizer state alive):
  forward end   states + autocast weight copies + every stage layer's saved activations (times the
                micro-batches a 1F1B pipeline keeps in flight) + the loss's transient logits;
  backward      at its start: forward's saved tensors + the logits-gradient peak + the first
                gradients + one layer's backward temporaries (+ that layer recomputed, under full
                recomputation); at its end: all gradients + one layer's temporaries. Activations
                and weight copies fall linearly while gradients grow, so the sweep peaks at an end;
  optimizer     weights + gradients + state + the optimizer's own temporaries.
With gradient accumulation, micro-batches after the first run with all gradients alive.
"""

from __future__ import annotations

from dataclasses import dataclass

from frenzy.core.gpu import GpuType
from frenzy.core.job import JobSpec
from frenzy.core.plan import ParallelPlan
from frenzy.core.training import Method, Recompute
from frenzy.memory import activations as act
from frenzy.memory import states
from frenzy.memory.overhead import allocator_overhead_bytes, runtime_overhead_bytes
from frenzy.memory.result import MemoryEstimate, Phase


@dataclass(frozen=True, slots=True)
class _Candidate:
    phase: Phase
    parts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.parts.values())


def _qlora_dequant_bytes(job: JobSpec, plan: ParallelPlan) -> int:
    """QLoRA dequantises one frozen projection at a time to a 16-bit temporary."""
    if job.training.method is not Method.QLORA:
        return 0
    return 2 * max(lin.weight_params for lin in job.model.linears) // plan.tp


def _head_gradient_bytes(job: JobSpec, plan: ParallelPlan) -> int:
    """The LM head's (or tied embedding's) gradient, allocated as backward leaves the loss."""
    if job.training.method is not Method.FULL:
        return 0
    arch = job.model
    rows = arch.vocab_size * arch.hidden_size // plan.tp
    return rows * job.training.precision.param_bytes // states.zero_divisor(plan, states.ZeroStage.GRADIENTS)


def _stage_candidates(job: JobSpec, plan: ParallelPlan, stage: int) -> list[_Candidate]:
    arch, training = job.model, job.training
    params = states.stage_params(arch, training, plan, stage)
    last = stage == plan.pp - 1
    tokens = plan.micro_batch * job.seq_len
    inflight = plan.pp - stage  # 1F1B: stage i holds pp - i micro-batches' activations
    layers = max(params.layers, 1)

    weights = states.weight_bytes(params, training, plan) + states.fsdp_unsharded_bytes(arch, params, training, plan)
    casts = states.autocast_weight_copy_bytes(params, training, plan)
    grads = states.gradient_bytes(params, training, plan)
    opt = states.optimizer_state_bytes(params, training, plan)
    buckets = states.ddp_bucket_bytes(params, training, plan)
    # Later micro-batches (accumulation, or a pipeline's steady state) run with gradients alive.
    early_grads = grads if plan.grad_accum > 1 or plan.pp > 1 else 0

    per_layer = act.stored_bytes_per_token_per_layer(arch, training, plan, job.seq_len) * tokens
    one_batch = params.layers * per_layer + act.embedding_bytes_per_token(arch, training) * tokens
    saved = one_batch * inflight
    others = one_batch * (inflight - 1)
    full_layer = act.layer_bytes_per_token(arch, training, plan, job.seq_len) * tokens
    recomputed = full_layer if plan.recompute is Recompute.FULL else 0
    layer_temp = act.layer_backward_temporary_bytes_per_token(arch, training, plan) * tokens + recomputed
    dequant = _qlora_dequant_bytes(job, plan)
    logits_fwd, _, logits_bwd = (n * tokens for n in act.logits_bytes_per_token(arch, training, plan))
    if not last:
        logits_fwd = logits_bwd = 0
    head_grad = _head_gradient_bytes(job, plan) if last else 0

    def candidate(phase, *, weights, grads, activations, logits=0, temporaries=0):
        return _Candidate(phase, {"weights": weights, "gradients": grads, "optimizer_state": opt,
                                  "activations": activations, "logits_loss": logits,
                                  "temporaries": temporaries + dequant})

    return [
        candidate(Phase.FORWARD, weights=weights + casts, grads=early_grads, activations=saved, logits=logits_fwd),
        # backward at the loss: the logits gradient on top of everything forward kept
        candidate(Phase.BACKWARD, weights=weights + casts, grads=early_grads, activations=saved, logits=logits_bwd),
        # backward entering the last layer: head gradient allocated, one layer's temporaries
        candidate(Phase.BACKWARD, weights=weights + casts, grads=max(early_grads, head_grad), activations=saved,
                  temporaries=layer_temp + buckets),
        # backward leaving the first layer: all gradients, one layer's activations and copies left
        candidate(Phase.BACKWARD, weights=weights + casts // layers, grads=grads, activations=others + per_layer,
                  temporaries=layer_temp + buckets),
        candidate(Phase.OPTIMIZER, weights=weights, grads=grads, activations=0,
                  temporaries=states.optimizer_step_temporary_bytes(params, training, plan) - dequant),
    ]


def estimate(job: JobSpec, plan: ParallelPlan, gpu: GpuType | None = None) -> MemoryEstimate:
    """Per-GPU peak memory of `job` under `plan` (the busiest rank across pipeline stages)."""
    stages = {0, plan.pp - 1}
    peak = max((c for s in stages for c in _stage_candidates(job, plan, s)), key=lambda c: c.total)
    allocated = peak.total
    persistent = peak.parts["weights"] + peak.parts["optimizer_state"] + peak.parts.get("gradients", 0)
    allocator = allocator_overhead_bytes(allocated, allocated - persistent)
    runtime = runtime_overhead_bytes(plan, gpu)
    breakdown = dict(peak.parts, allocator_overhead=allocator, runtime_overhead=runtime)
    return MemoryEstimate(
        allocated_bytes=allocated,
        reserved_bytes=allocated + allocator,
        device_bytes=allocated + allocator + runtime,
        breakdown=breakdown,
        peak_phase=peak.phase,
    )

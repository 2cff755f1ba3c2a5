"""MARP: compose model states, activations and logits into the per-GPU peak of a training step.

The step is walked at the granularity where peaks can occur (second step, optimizer state alive):
  forward end   states + autocast weight copies + every stage layer's saved activations (times the
                micro-batches a 1F1B pipeline keeps in flight) + the loss's transient logits;
  backward      at its start: forward's saved tensors + the logits-gradient peak + the first
                gradients + one layer's backward temporaries (+ that layer recomputed, under full
                recomputation); at its end: all gradients + one layer's temporaries. Activations
                and weight copies fall linearly while gradients grow, so the sweep peaks at an end.
                Under full recomputation backward keeps only the LM head's and the recomputed
                layer's weight copies (the checkpoints saved none);
  optimizer     weights + gradients + state + the optimizer's own temporaries.
With gradient accumulation, micro-batches after the first run with all gradients alive.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from frenzy.core.gpu import GpuType
from frenzy.core.job import JobSpec
from frenzy.core.plan import ParallelPlan, check_mixed_precision
from frenzy.core.training import Method
from frenzy.memory import activations as act
from frenzy.memory import fsdp_mixed, pipeline_stage, states
from frenzy.memory.overhead import allocator_overhead_bytes, runtime_overhead_bytes
from frenzy.memory.result import MemoryEstimate, Phase


_PARTS = ("weights", "gradients", "optimizer_state", "activations", "logits_loss", "temporaries")


@lru_cache(maxsize=16384)  # plan enumeration revisits the same model-state shapes many times
def _model_states(job: JobSpec, tp: int, pp: int, stage: int, dp: int, zero, mixed) -> tuple[int, ...]:
    """(weights incl. FSDP buffers, autocast copies, gradients, optimizer state, DDP/ZeRO buckets,
    optimizer-step temporaries, layers on the stage) of one rank."""
    plan = ParallelPlan(dp=dp, tp=tp, pp=pp, zero=zero, mixed_precision=mixed)
    arch, training = job.model, job.training
    params = states.stage_params(arch, training, plan, stage)
    return (states.weight_bytes(params, training, plan) + states.fsdp_unsharded_bytes(arch, params, training, plan),
            states.autocast_weight_copy_bytes(params, training, plan),
            states.gradient_bytes(params, training, plan),
            states.optimizer_state_bytes(params, training, plan),
            states.ddp_bucket_bytes(params, training, plan),
            states.optimizer_step_temporary_bytes(params, training, plan),
            params.layers)


def model_state_floor_bytes(job: JobSpec, plan: ParallelPlan) -> int:
    """A lower bound of estimate(job, plan).allocated_bytes that no activation enters: the busiest
    stage's weights, gradients, optimizer state and step temporaries, all alive at the optimizer
    step. Plan enumeration skips a shape whose floor already exceeds a GPU without estimating it."""
    return max(sum(states[i] for i in (0, 2, 3, 5)) for states in (
        _model_states(job, plan.tp, plan.pp, stage, plan.dp, plan.zero, plan.mixed_precision)
        for stage in {0, plan.pp - 1}))


def _qlora_dequant_bytes(job: JobSpec, plan: ParallelPlan) -> int:
    """QLoRA dequantises one frozen projection at a time to a 16-bit temporary (fused MoE experts
    are not quantised, so never dequantised)."""
    if job.training.method is not Method.QLORA:
        return 0
    arch = job.model
    dense_mlp = arch.dense_intermediate_size * arch.hidden_size if arch.dense_layers else 0  # DeepSeek's dense layers
    return 2 * max(dense_mlp, *(lin.weight_params for lin in arch.linears if not lin.per_expert)) // plan.tp


def _head_gradient_bytes(job: JobSpec, plan: ParallelPlan) -> int:
    """The LM head's (or tied embedding's) gradient, allocated as backward leaves the loss."""
    if job.training.method is not Method.FULL:
        return 0
    arch = job.model
    rows = arch.vocab_size * arch.hidden_size // plan.tp
    return rows * job.training.precision.param_bytes // states.zero_divisor(plan, states.ZeroStage.GRADIENTS)


def _embedding_gradient_temporary_bytes(job: JobSpec, plan: ParallelPlan, stage: int) -> int:
    """A tied embedding already holds the LM head's gradient when the embedding backward produces
    its own full-size gradient; the two coexist until they are summed."""
    arch = job.model
    if stage != 0 or not arch.tie_word_embeddings or plan.pp > 1 or job.training.method is not Method.FULL:
        return 0
    return arch.vocab_size * arch.hidden_size // plan.tp * job.training.precision.param_bytes


def _backward_autocast_copies(job: JobSpec, plan: ParallelPlan, casts: int, layers: int, last: bool) -> tuple[int, int]:
    """Autocast weight copies alive in backward (at the loss, then entering the last layer).

    Without recomputation autograd saved every copy for its backward matmul. Under full or selective
    recomputation the checkpointed layers saved none of theirs: those copies lived only in autocast's
    cast cache, which is cleared when the forward leaves its autocast region (the forward itself
    still peaks with all of them). The LM head runs outside the checkpoints, so its matmul keeps its
    copy until the head's backward; then the layer being recomputed casts its weights afresh and
    keeps those copies until its own backward."""
    if not plan.recompute.checkpoints_layers:
        return casts, casts
    head = states.autocast_head_copy_bytes(job.model, job.training, plan, last)
    return head, (casts - head) // max(layers, 1)


@lru_cache(maxsize=16384)  # a plan's micro-batches share these (a profiled family's depend on it)
def _per_token_bytes(job: JobSpec, tp: int, pp: int, dp: int, zero, recompute, sp: bool, mixed, stage: int,
                     micro_batch: int) -> tuple[int, ...]:
    """(one layer's saved tensors, what lives outside the layers, a recomputed layer's tensors, one
    layer's backward temporaries, a grouped-mm MoE block's forward and backward temporaries, what the
    last stage keeps outside the layers, the logits forward / between / backward) per token on `stage`."""
    arch, seq = job.model, job.seq_len
    plan = ParallelPlan(dp=dp, tp=tp, pp=pp, zero=zero, recompute=recompute, sequence_parallel=sp,
                        mixed_precision=mixed, micro_batch=micro_batch)
    training = fsdp_mixed.compute_training(job.training, plan)  # what activations follow
    last = stage == pp - 1
    outside = act.outside_layers_bytes_per_token(arch, training, stage == 0, last, seq, recompute)
    outside -= act.sequence_parallel_saving_bytes_per_token(arch, training, plan, last)
    if stage == 0:
        outside -= act.first_layer_unsaved_bytes_per_token(arch, training, plan, seq)
        outside += act.embedding_leaf_bytes_per_token(arch, training, plan)
    logits = act.logits_bytes_per_token(arch, training, plan) if last else (0, 0, 0)
    head = act.outside_layers_bytes_per_token(arch, training, False, True, seq, recompute) if last else 0
    return (act.stored_bytes_per_token_per_layer(arch, training, plan, seq), outside,
            act.recomputed_layer_bytes_per_token(arch, training, plan, seq),
            act.layer_backward_temporary_bytes_per_token(arch, training, plan),
            act.moe_forward_temporary_bytes_per_token(arch, training) + act.moe_layer_locals_bytes_per_token(
                arch, training, plan),
            act.moe_backward_temporary_bytes_per_token(arch, training), head, *logits)


@dataclass(frozen=True, slots=True, kw_only=True)
class _StageTerms:
    """What one pipeline stage's peak candidates take that the micro-batch does not change: the
    micro-batches of a plan shape share them, and plan enumeration estimates several of each."""

    model_states: tuple[int, ...]  # _model_states: weights .. optimizer-step temporaries, layers
    per_token: tuple[int, ...]  # _per_token_bytes at micro-batch 1 (a profiled family's are looked up per batch)
    moe_first_layer_grads: int  # gradients alive as a grouped-mm MoE layer's backward is widest
    dequant: int
    head_grad: int
    casts_at_loss: int
    casts_in_last_layer: int
    embedding_temp: int
    fsdp: tuple[int, ...]  # _fsdp_param_terms under fsdp2-param, else ()


@lru_cache(maxsize=16384)
def _stage_terms(job: JobSpec, tp: int, pp: int, dp: int, zero, recompute, sp: bool, mixed, stage: int) -> _StageTerms:
    # The plan below has one micro-batch and no accumulation: a term read from its micro_batch or
    # grad_accum would be wrong for every other micro-batch, which is why none of these reads them.
    arch, last = job.model, stage == pp - 1
    plan = ParallelPlan(dp=dp, tp=tp, pp=pp, zero=zero, recompute=recompute, sequence_parallel=sp,
                        mixed_precision=mixed)
    model_states = _model_states(job, tp, pp, stage, dp, zero, mixed)
    weights, casts, grads, layers = model_states[0], model_states[1], model_states[2], model_states[6]
    casts_at_loss = casts_in_last_layer = 0
    if not plan.fsdp_param_dtype:
        casts_at_loss, casts_in_last_layer = _backward_autocast_copies(job, plan, casts, layers, last)
    embedding_temp = (_embedding_gradient_temporary_bytes(job, plan, stage) if pp == 1 else
                      pipeline_stage.embedding_gradient_temporary_bytes(arch, job.training, plan, stage))
    return _StageTerms(
        model_states=model_states,
        per_token=_per_token_bytes(job, tp, pp, dp, zero, recompute, sp, mixed, stage, 1),
        moe_first_layer_grads=states.gradients_before_first_layer_bytes(
            arch, fsdp_mixed.compute_training(job.training, plan), plan, stage),
        dequant=_qlora_dequant_bytes(job, plan), head_grad=_head_gradient_bytes(job, plan) if last else 0,
        casts_at_loss=casts_at_loss, casts_in_last_layer=casts_in_last_layer, embedding_temp=embedding_temp,
        fsdp=_fsdp_param_terms(job, plan, stage, weights, grads) if plan.fsdp_param_dtype else ())


def _stage_candidates(job: JobSpec, plan: ParallelPlan, stage: int) -> list[tuple[Phase, tuple[int, ...]]]:
    """Peak candidates of one pipeline stage as (phase, bytes per part in _PARTS order)."""
    arch = job.model
    terms = _stage_terms(job, plan.tp, plan.pp, plan.dp, plan.zero, plan.recompute, plan.sequence_parallel,
                         plan.mixed_precision, stage)
    weights, casts, grads, opt, buckets, opt_temp, layers = terms.model_states
    tokens = plan.micro_batch * job.seq_len
    # Later micro-batches (accumulation, or a pipeline's steady state) run with gradients alive.
    early_grads = grads if plan.grad_accum > 1 or plan.pp > 1 else 0

    # `recomputed`: under recomputation backward re-runs one layer's forward, whose activations come back
    per_layer, outside, recomputed, layer_temp, moe_temp, moe_back, head_outside, *logits = (
        n * tokens for n in (terms.per_token if not arch.profile_key else _per_token_bytes(
            job, plan.tp, plan.pp, plan.dp, plan.zero, plan.recompute, plan.sequence_parallel, plan.mixed_precision,
            stage, plan.micro_batch)))
    one_batch, buffers = layers * per_layer + outside, 0
    if plan.pp > 1:  # a pipeline stage's cached output and receive buffers
        training = fsdp_mixed.compute_training(job.training, plan)
        one_batch += pipeline_stage.cached_output_bytes(arch, training, plan, stage, job.seq_len)
        buffers = pipeline_stage.receive_buffer_bytes(arch, training, plan, stage, job.seq_len)
    first_layer_grads, head_saved = grads, 0
    if moe_back:
        # a grouped-mm MoE layer's backward is widest as its experts' backward starts (before the
        # layer's and the embedding's gradients exist, after the head's and final norm's saved tensors
        # are gone), or, with experts wider than the hidden size, where their gate/up gradients are made
        layer_temp = max(layer_temp, moe_back)
        first_layer_grads = terms.moe_first_layer_grads
        head_saved = head_outside
    dequant, head_grad, embedding_temp = terms.dequant, terms.head_grad, terms.embedding_temp
    logits_fwd, _, logits_bwd = logits
    if plan.fsdp_param_dtype:
        inflight = pipeline_stage.in_flight_micro_batches(plan, stage)
        return _fsdp_param_candidates(terms, early_grads, (
            one_batch * inflight + buffers, one_batch * (inflight - 1) + buffers, per_layer, recomputed, layer_temp,
            logits_fwd, logits_bwd))
    # QLoRA's dequantised 16-bit copy of one projection lives beside the weights while a layer runs;
    # at the loss (forward end, backward start) only the LM head, which is not quantised, is running.
    casts_at_loss, casts_in_last_layer = terms.casts_at_loss, terms.casts_in_last_layer

    def sequence(inflight: int, early: int, embedding_temp: int) -> list[tuple[Phase, tuple[int, ...]]]:
        """The candidates with `inflight` micro-batches in flight (the other ones keep the weight
        copies their forward saved) and `early` gradient bytes alive from the start."""
        saved, others = one_batch * inflight + buffers, one_batch * (inflight - 1) + buffers
        held = weights + casts_at_loss * (inflight - 1)
        return [
            (Phase.FORWARD, (held + casts, early, opt, saved, logits_fwd, 0)),
            # forward inside the last MoE block: its experts' output copies and the layer's residual
            # (and norm-output shard) beside what the layers keep
            (Phase.FORWARD, (held + casts, early, opt, saved, 0, moe_temp)),
            # backward at the loss: the logits gradient on top of everything forward kept
            (Phase.BACKWARD, (held + casts_at_loss, early, opt, saved, logits_bwd, 0)),
            # backward entering the last layer: head gradient allocated, one layer's temporaries
            (Phase.BACKWARD, (held + casts_in_last_layer + dequant, max(early, head_grad), opt,
                              saved - head_saved + recomputed, 0, layer_temp + buckets)),
            # backward leaving the first layer: all gradients (an MoE layer's own and the embedding's
            # come after its widest point), one layer's activations and copies left
            (Phase.BACKWARD, (held + casts // max(layers, 1) + dequant, max(early, first_layer_grads), opt,
                              others + per_layer + recomputed, 0, layer_temp + buckets)),
            # backward through the embedding: its new gradient beside the one it adds into
            (Phase.BACKWARD, (held, grads, opt, others, 0, buckets + embedding_temp)),
        ]

    optimizer = [(Phase.OPTIMIZER, (weights, grads, opt, 0, 0, opt_temp))]
    if plan.pp == 1:
        return sequence(1, early_grads, embedding_temp) + optimizer
    # 1F1B: the warm-up forwards run before this step's first gradient; later ones (if any) with all
    # gradients alive and one micro-batch fewer in flight once no forward is left.
    warm = pipeline_stage.in_flight_micro_batches(plan, stage)
    steady = warm if plan.grad_accum > warm else warm - 1
    candidates = sequence(warm, 0, 0) + optimizer
    if steady:
        candidates += sequence(steady, grads, embedding_temp)
    return candidates


def _fsdp_param_terms(job: JobSpec, plan: ParallelPlan, stage: int, weights: int, grads: int) -> tuple[int, ...]:
    """The fsdp2-param mode's micro-batch-independent terms (frenzy.memory.fsdp_mixed): (weights with
    the gathered root, one gathered layer, layers kept gathered, the root's bf16 gradients, a layer's
    reduce-scatter input, the layers' sharded gradients, a tied embedding's second gradient, the
    root's own reduce-scatter)."""
    params = states.stage_params(job.model, job.training, plan, stage)
    keep = params.layers if plan.zero < states.ZeroStage.PARAMETERS else 0  # ZeRO-1/2: gathered until backward
    root_trainable = fsdp_mixed.root_trainable(params, job.training)
    return (weights + fsdp_mixed.gathered_root_bytes(params), fsdp_mixed.gathered_layer_bytes(params), keep,
            2 * root_trainable,  # bf16, reduced when backward ends
            fsdp_mixed.reduce_scatter_input_bytes(fsdp_mixed.layer_trainable(params, job.training)),
            grads - fsdp_mixed.sharded_root_gradient_bytes(params, job.training, plan),
            fsdp_mixed.tied_embedding_gradient_bytes(job.model, job.training, plan, stage),
            fsdp_mixed.reduce_bytes(root_trainable))


def _fsdp_param_candidates(terms: _StageTerms, early_grads: int,
                           activations: tuple[int, ...]) -> list[tuple[Phase, tuple[int, ...]]]:
    """The peak candidates of the fsdp2-param mode (frenzy.memory.fsdp_mixed): sharded fp32 states,
    bf16 gathered parameters by phase, and in backward the unsharded bf16 gradients with the fp32
    reduce-scatter input of the unit reduced last, which FSDP2 keeps until the next reduce-scatter."""
    weights, _, grads, opt, _, opt_temp, layers = terms.model_states
    root, one, keep, root_grads, in_flight, layer_grad, tied_grads, root_reduce = terms.fsdp
    saved, others, per_layer, recomputed, layer_temp, logits_fwd, logits_bwd = activations
    candidates = [
        # forward end: the last all-gather's flat buffer is still held
        (Phase.FORWARD, (root + (keep + 1) * one, early_grads, opt, saved, logits_fwd, 0)),
        # at the loss: the root re-gathered by its pre-backward hook, which prefetches the last layer
        (Phase.BACKWARD, (root + max(keep, 1) * one, early_grads, opt, saved, logits_bwd, 0)),
        # backward through the embedding: the first layer's reduce-scatter input in flight, the root's
        # bf16 gradients (a tied embedding's second one beside the head's)
        (Phase.BACKWARD, (root, early_grads or layer_grad, opt, others, 0, in_flight + root_grads + tied_grads)),
        # the root's own reduce-scatter when backward ends: its bf16 gradients and their fp32 copy (the
        # root's parameters resharded and the first layer's reduce-scatter done first)
        (Phase.BACKWARD, (weights, early_grads or layer_grad, opt, others, 0, root_reduce)),
        (Phase.OPTIMIZER, (weights, grads, opt, 0, 0, opt_temp)),
    ]
    # inside layer i's backward (the peak is at the last, second-to-last, second or first layer):
    # it is gathered, and the next one prefetched (ZeRO-3; ZeRO-1/2 hold layers 0..i since forward),
    # the layers above hold sharded gradients and the last one's reduce-scatter input is in flight
    for i in sorted({layers - 1, layers - 2, 1, 0} & set(range(layers))):
        above = layers - 1 - i
        gathered = (i + 1) * one if keep else (1 + (i > 0)) * one
        sharded = early_grads or layer_grad * above // max(layers, 1)
        candidates.append((Phase.BACKWARD, (root + gathered, sharded, opt, others + (i + 1) * per_layer + recomputed,
                                            0, layer_temp + root_grads + (in_flight if above else 0))))
    return candidates


def peak(job: JobSpec, plan: ParallelPlan, stage: int | None = None) -> tuple[Phase, tuple[int, ...]]:
    """The peak of `job` under `plan` as (phase, bytes per part in _PARTS order): the largest
    candidate of the busiest rank across pipeline stages, or of pipeline stage `stage`'s rank."""
    check_mixed_precision(job.training, plan)
    if stage is not None and not 0 <= stage < plan.pp:
        raise ValueError(f"stage {stage} is not one of the plan's {plan.pp} pipeline stages")
    candidates = _stage_candidates(job, plan, 0 if stage is None else stage)
    if stage is None and plan.pp > 1:
        candidates += _stage_candidates(job, plan, plan.pp - 1)
    totals = [sum(parts) for _, parts in candidates]
    return candidates[totals.index(max(totals))]  # the first of equal peaks


def peak_required_bytes(plan: ParallelPlan, parts: tuple[int, ...]) -> int:
    """MemoryEstimate.required_bytes of the peak `parts` of `plan`, without building the estimate:
    what plan enumeration compares against every GPU type's room."""
    return sum(parts) + runtime_overhead_bytes(plan)


def estimate_at_peak(plan: ParallelPlan, phase: Phase, parts: tuple[int, ...],
                     gpu: GpuType | None = None) -> MemoryEstimate:
    """The MemoryEstimate of a peak found by `peak`: its parts plus allocator and runtime overheads."""
    allocated = sum(parts)
    persistent = parts[0] + parts[1] + parts[2]
    allocator = allocator_overhead_bytes(allocated, allocated - persistent)
    runtime = runtime_overhead_bytes(plan, gpu)
    breakdown = dict(zip(_PARTS, parts), allocator_overhead=allocator, runtime_overhead=runtime)
    return MemoryEstimate(
        allocated_bytes=allocated,
        reserved_bytes=allocated + allocator,
        device_bytes=allocated + allocator + runtime,
        breakdown=breakdown,
        peak_phase=phase,
    )


def estimate(job: JobSpec, plan: ParallelPlan, gpu: GpuType | None = None, stage: int | None = None) -> MemoryEstimate:
    """Per-GPU peak memory of `job` under `plan`: the busiest rank across pipeline stages, or the
    rank of pipeline stage `stage`."""
    return estimate_at_peak(plan, *peak(job, plan, stage), gpu)

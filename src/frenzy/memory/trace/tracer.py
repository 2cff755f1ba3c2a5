"""trace_step: build one rank's model on fake tensors, run two training steps, measure the second."""

from __future__ import annotations

import gc
import time
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from functools import partial

from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode

from frenzy.core.hf_config import load_config
from frenzy.core.plan import ParallelPlan
from frenzy.core.training import Attention, Method, Optimizer, Recompute, TrainingConfig, recompute_warning
from frenzy.memory.result import COMPONENTS, MemoryEstimate, Phase
from frenzy.memory.trace import build, experts, fsdp, optim, patches, pipeline_stage, sequence_parallel, step
from frenzy.memory.trace.cuda_semantics import CudaSemantics
from frenzy.memory.trace.known_values import KnownValues, run_retrying_with_known_values
from frenzy.memory.trace.qlora import Nf4Linear
from frenzy.memory.trace.recorder import WEIGHTS, AllocationRecorder, EventLog
from frenzy.memory.trace.replay import Replay, replay
from frenzy.train.layers import decoder_layers
from frenzy.train.recompute import enable_recompute


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceResult:
    """What one traced training step used on one GPU (the second step; optimizer state alive)."""

    estimate: MemoryEstimate
    peak_by_phase: dict[Phase, int]
    activation_bytes_per_layer: int  # saved for backward by one middle decoder layer (one micro-batch)
    params: int  # parameters of this rank's model (QLoRA: counting the quantised weights' elements)
    trainable_params: int
    trace_seconds: float
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Recording:
    """The raw outcome of a traced run, before replay (for trace_step and for inspection)."""

    log: EventLog
    params: int
    trainable_params: int
    notes: tuple[str, ...]


def trace_step(model: str, training: TrainingConfig, plan: ParallelPlan, seq_len: int,
               stage: int = 0) -> TraceResult:
    """Run the real HF training step of `model` under `training`/`plan` on fake tensors.

    `plan.tp` shapes the rank's shard and `plan.sequence_parallel` the shapes of its stream
    (trace.sequence_parallel); with `plan.pp` > 1 the rank is pipeline stage `stage`, run in
    Schedule1F1B's order (trace.pipeline_stage); dp and zero are not traced (a single rank without
    communication buffers or sharded states), except in the fsdp2-param mixed-precision mode, which
    runs the real FSDP2 at world size dp (trace.fsdp).
    """
    started = time.perf_counter()
    recording = record_steps(model, training, plan, seq_len, stage=stage)
    result = replay(recording.log, step.MEASURED_STEP)
    return TraceResult(
        estimate=_estimate(result),
        peak_by_phase=result.peak_by_phase,
        activation_bytes_per_layer=_layer_growth(result),
        params=recording.params,
        trainable_params=recording.trainable_params,
        trace_seconds=time.perf_counter() - started,
        notes=recording.notes,
    )


def record_steps(model: str, training: TrainingConfig, plan: ParallelPlan, seq_len: int,
                 keep_origins: bool = False, keep_layers: list[int] | None = None,
                 steps: int = step.STEPS, stage: int = 0, whole_prefix: bool = False) -> Recording:
    """Build and run the model on fake tensors; the allocation log of its steps. `keep_layers`
    runs a reduced-depth copy holding only those decoder layers (with `whole_prefix`, every layer
    up to the last of them)."""
    return run_retrying_with_known_values(  # a family that routes by values: frenzy.memory.trace.known_values
        partial(_record_steps, model, training, plan, seq_len, keep_origins, keep_layers, steps, stage, whole_prefix))


def _record_steps(model: str, training: TrainingConfig, plan: ParallelPlan, seq_len: int, keep_origins: bool,
                  keep_layers: list[int] | None, steps: int, stage: int, whole_prefix: bool,
                  known_values: bool) -> Recording:
    if seq_len < 1:
        raise ValueError(f"seq_len must be >= 1, got {seq_len}")
    cfg, _name = load_config(model)
    cfg = build.language_model_config(cfg)
    build.check_sequence(cfg, seq_len)
    cfg = build.shard_config(cfg, plan.tp)
    notes = list(_plan_notes(training, plan))
    sharded = plan.fsdp_param_dtype
    with _quiet_gc(), ExitStack() as stack:
        mesh = stack.enter_context(fsdp.fake_process_group(plan.dp)) if sharded else None
        stack.enter_context(FakeTensorMode())
        stack.enter_context(patches.gpu_decisions())
        semantics = stack.enter_context(CudaSemantics())
        net, build_notes = build.build_model(cfg, training, keep_layers, whole_prefix)
        notes += build_notes
        vocab = net.get_output_embeddings().weight.shape[0]
        piped = _pipeline_stage(net, training, plan, stage)
        layers = decoder_layers(net)
        experts.split_by_expert(layers, cfg["model_type"], plan.tp)
        recorder = AllocationRecorder(vocab_size=vocab, keep_origins=keep_origins)
        _configure_recompute(net, layers, training, plan, recorder, semantics, stack)
        if sharded:
            fsdp.shard(net, layers, plan, mesh)
            stack.enter_context(fsdp.recorded(recorder))
        trainable = [p for p in net.parameters() if p.requires_grad]
        optimizer = optim.build_optimizer(trainable, training.optimizer)
        hooks = step.install_hooks(recorder, layers, trainable)
        if plan.sequence_parallel and not sharded:
            hooks += sequence_parallel.emulate(net, layers, cfg["model_type"], plan.tp, seq_len)
        with KnownValues() if known_values else nullcontext(), recorder:
            for tensor in (*net.parameters(), *net.buffers()):
                recorder.register(fsdp.local(tensor), WEIGHTS)
            if piped is not None:
                pipeline_stage.run_stage_steps(
                    net, optimizer, recorder, piped, micro_batch=plan.micro_batch, seq_len=seq_len,
                    grad_accum=plan.grad_accum, vocab_size=vocab, hidden_size=net.config.hidden_size,
                    hidden_dtype=build.base_dtype(training), host_state=optim.host_state_keys(training.optimizer),
                    steps=steps)
            else:
                step.run_steps(net, optimizer, recorder, precision=training.precision, micro_batch=plan.micro_batch,
                               seq_len=seq_len, grad_accum=plan.grad_accum, vocab_size=vocab,
                               host_state=optim.host_state_keys(training.optimizer), steps=steps,
                               autocast=not sharded)
        log = recorder.stop()
        for handle in hooks:
            handle.remove()
        params, trainable_count = _count_params(net)
        kernels = ", ".join(f"{name} x{n}" for name, n in sorted(semantics.sdpa_choices.items()))
        notes.append(f"sdpa kernels (as CUDA would pick): {kernels}" if kernels else "no sdpa calls")
    return Recording(log=log, params=params, trainable_params=trainable_count, notes=tuple(notes))


def _pipeline_stage(net: nn.Module, training: TrainingConfig, plan: ParallelPlan, stage: int):
    """With pp > 1 (and not the FSDP2 trace), keep stage `stage`'s part of the model; None otherwise."""
    if plan.pp == 1 or plan.fsdp_param_dtype:
        return None
    from frenzy.memory.states import stage_layer_range

    layers = stage_layer_range(net.config.num_hidden_layers, plan.pp, stage)
    return pipeline_stage.make_stage(net, stage, plan.pp, layers, training.precision)


@contextmanager
def _quiet_gc():
    """Frees must follow reference counts alone (as on a GPU between collections), deterministically."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _configure_recompute(net: nn.Module, layers: nn.ModuleList, training: TrainingConfig, plan: ParallelPlan,
                         recorder: AllocationRecorder, semantics: CudaSemantics, stack: ExitStack) -> None:
    # The worker's own checkpointing (frenzy.train.recompute); the extra context_fn only re-enters
    # the CUDA-semantics mode during recomputation (a GPU run needs none).
    if plan.recompute in (Recompute.FULL, Recompute.SELECTIVE):
        enable_recompute(net, plan.recompute.name.lower(), semantics.checkpoint_contexts)
    elif plan.recompute is Recompute.ATTENTION and training.attention is Attention.EAGER:
        stack.enter_context(patches.attention_recompute(
            layers, lambda: step.forward_region(recorder), semantics.checkpoint_contexts))


def _plan_notes(training: TrainingConfig, plan: ParallelPlan):
    if plan.fsdp_param_dtype:
        yield (f"FSDP2 MixedPrecisionPolicy(bf16, fp32) traced at dp {plan.dp} on a fake process group; "
               "CUDA-stream overlap (all-gather prefetch, reduce-scatter in flight) is not traced")
        if plan.pp > 1 or plan.tp > 1 or plan.sequence_parallel:
            yield "tp/pp/sequence-parallel are not traced beside FSDP2: one rank's shard of the whole model"
    elif plan.dp > 1 or plan.zero:
        yield "dp/zero are not traced: one rank, unsharded states"
    if plan.pp > 1 and not plan.fsdp_param_dtype:
        yield "one pipeline stage in Schedule1F1B's order; its sends and receives are not run (receive buffers are)"
    if plan.sequence_parallel and not plan.fsdp_param_dtype:
        yield "sequence parallelism: rank 0's sequence shards; the collectives' transient buffers are not traced"
    if warning := recompute_warning(plan.recompute, training.attention):
        yield warning
    if training.method is Method.QLORA:
        yield ("QLoRA: bitsandbytes NF4 represented by its tensors (packed uint8, double-quantised "
               "absmax, code tables) and MatMul4Bit's autograd (saves packed weight, dequantises twice)")
    if training.optimizer is Optimizer.ADAMW_8BIT:
        yield "AdamW8bit: bitsandbytes state layout emulated; in-place update, no step temporaries"
    yield "runtime overhead (CUDA context, cuBLAS workspace, kernel scratch) is not traceable: 0"


def _count_params(net: nn.Module) -> tuple[int, int]:
    total = sum(p.numel() for p in net.parameters())
    total += sum(m.in_features * m.out_features for m in net.modules() if isinstance(m, Nf4Linear))
    return total, sum(p.numel() for p in net.parameters() if p.requires_grad)


def _estimate(result: Replay) -> MemoryEstimate:
    breakdown = dict.fromkeys(COMPONENTS, 0)
    breakdown.update(result.peak_breakdown)
    breakdown["allocator_overhead"] = result.reserved_bytes - result.peak_bytes
    breakdown["runtime_overhead"] = 0
    return MemoryEstimate(
        allocated_bytes=result.peak_bytes,
        reserved_bytes=result.reserved_bytes,
        device_bytes=result.reserved_bytes,
        breakdown=breakdown,
        peak_phase=result.peak_phase,
        source="trace",
    )


def _layer_growth(result: Replay) -> int:
    before, after = result.at_marks.get(step.LAYER_PRE), result.at_marks.get(step.LAYER_POST)
    if before is None or after is None:
        return 0
    return after["activations"] - before["activations"]


__all__ = ["TraceResult", "trace_step"]

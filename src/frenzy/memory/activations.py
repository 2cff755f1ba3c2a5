"""Activation memory of a step, per token of one micro-batch on one tensor-parallel rank: what each
layer keeps under the plan's recomputation (the layer inventory is `layer_inventory`; a profiled
family's layers come from `frenzy.memory.profiled`), what the forward keeps outside the layers, the
backward's temporaries, and the logits and loss.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache

from frenzy.core.model import ModelArch, Norm, Router
from frenzy.core.plan import ParallelPlan
from frenzy.core.training import Method, Recompute, TrainingConfig
from frenzy.memory.layer_inventory import (_norms_share_input, checkpointed_input_bytes, layer_inventory,
                                           mlp_saved, norm_saved, qk_norm_saved, residual_bytes,
                                           routed_expert_width)
from frenzy.memory.layer_mla import dense_layer_arch
from frenzy.memory.profiled import activation_profile
from frenzy.memory.selective import (selective_cache_bytes_per_token, selective_is_modelled,
                                     selective_layer_bytes_per_token)


def layer_bytes_per_token(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan, seq: int) -> int:
    """What one layer keeps without recomputation (a profiled family: its widest layer kind)."""
    if arch.profile_key:
        return round(activation_profile(arch, training, seq).widest_layer(seq, plan.micro_batch))
    return _layer_bytes(arch, training, plan.tp, plan.sequence_parallel, plan.recompute, seq)


@lru_cache(maxsize=4096)  # plan enumeration asks for the same layer shape many times
def _layer_bytes(arch: ModelArch, training: TrainingConfig, tp: int, sp: bool, recompute: Recompute, seq: int) -> int:
    plan = ParallelPlan(tp=tp, sequence_parallel=sp, recompute=recompute)
    if arch.dense_layers or arch.nope_layers:
        return _mean_layer(arch, training, plan, seq)
    windowed = sum(layer_inventory(arch, training, plan, seq).values())
    if not (arch.sliding_window and arch.global_layers):
        return windowed
    # Interleaved sliding/global layers (Gemma 3, Cohere 2): the mean layer; only windowed layers
    # need an explicit mask once the sequence reaches the window.
    full = sum(layer_inventory(arch, training, plan, seq, windowed=False).values())
    n, g = arch.num_layers, min(arch.global_layers, arch.num_layers)
    return (windowed * (n - g) + full * g) // n


def _mean_layer(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan, seq: int) -> int:
    """Layers of different kinds in one model (Llama 4: RoPE or NoPE attention, MoE or dense MLP,
    independently; DeepSeek: dense first layers): the common layer's bytes plus the count-weighted
    differences of the NoPE attention and of a dense layer (DeepSeek's: MLA and a gated MLP of the
    dense width, `layer_mla.dense_layer_arch`)."""
    n = arch.num_layers
    nope, dense = min(arch.nope_layers, n), min(arch.dense_layers, n)
    common = sum(layer_inventory(arch, training, plan, seq).values())
    no_rope = sum(layer_inventory(arch, training, plan, seq, rope=False).values()) - common if nope else 0
    if arch.mla_kv_rank:
        dense_layer = sum(layer_inventory(dense_layer_arch(arch), training, plan, seq).values())
    else:
        dense_layer = sum(layer_inventory(arch, training, plan, seq, dense=True).values())
    return common + (no_rope * nope + (dense_layer - common) * dense) // n


def checkpoint_bytes_per_token(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan) -> int:
    """Full recomputation keeps each layer's input (residual stream) and nothing else."""
    width = arch.hidden_size // (plan.tp if plan.sequence_parallel else 1)
    return checkpointed_input_bytes(arch, training) * width


def stored_bytes_per_token_per_layer(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan, seq: int) -> int:
    """What each layer keeps between its forward and backward under the plan's recomputation (a
    profiled family: the mean over its layer kinds; selective recomputation (`memory.selective`)
    where it is not modelled counts as none, an upper bound)."""
    if arch.profile_key:
        profile = activation_profile(arch, training, seq)
        if plan.recompute is Recompute.FULL:
            return round(profile.mean_checkpoint())
        return round(profile.mean_layer(seq, plan.micro_batch))
    if plan.recompute is Recompute.FULL:
        return checkpoint_bytes_per_token(arch, training, plan)
    if plan.recompute is Recompute.SELECTIVE:
        if selective_is_modelled(arch, training):
            return selective_layer_bytes_per_token(arch, training, plan)
        return layer_bytes_per_token(arch, training, dataclasses.replace(plan, recompute=Recompute.NONE), seq)
    return layer_bytes_per_token(arch, training, plan, seq)


def recomputed_layer_bytes_per_token(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan, seq: int) -> int:
    """What backward's re-run of one checkpointed layer brings back on top of what the layer kept.

    Full recomputation: the layer's saved tensors (`layer_bytes_per_token`). Selective: every saved
    tensor of the layer without recomputation (eager attention's scores included), less SAC's cache,
    which the re-run takes over instead of recomputing it."""
    if plan.recompute is Recompute.FULL:
        return layer_bytes_per_token(arch, training, plan, seq)
    if plan.recompute is not Recompute.SELECTIVE or not selective_is_modelled(arch, training):
        return 0
    whole = layer_bytes_per_token(arch, training, dataclasses.replace(plan, recompute=Recompute.NONE), seq)
    return max(whole - selective_cache_bytes_per_token(arch, training, plan), 0)


def layer_backward_temporary_bytes_per_token(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan) -> int:
    """Gradients flowing through one layer's backward at its widest point: the incoming and outgoing
    residual-stream gradients plus the MLP's intermediate gradients (gate/up/product, 16-bit)."""
    c = training.precision.compute_bytes
    r = residual_bytes(training.precision)
    inter = (routed_expert_width(arch, plan) if arch.is_moe else arch.intermediate_size // plan.tp) * (
        arch.experts_per_token or 1)
    return 2 * r * arch.hidden_size + (3 if arch.mlp_gated else 2) * c * inter


def moe_backward_temporary_bytes_per_token(arch: ModelArch, training: TrainingConfig) -> int:
    """Where a grouped-mm MoE layer's backward is widest, per token: as the experts' backward starts,
    with everything the layer saved alive and the layer's own weight gradients not yet made, the
    incoming residual-stream gradient, the routed-sum gradient expanded to every choice, and the
    zeros it is scattered into back in expert order beside the scattered copy (k rows each, in the
    routing-weighted outputs' dtype). Split by expert these rows are every token's (tp does not
    shrink them). 0 for a model without grouped-mm experts."""
    if not _grouped_experts(arch):
        return 0
    h = arch.hidden_size
    return residual_bytes(training.precision) * h + 3 * arch.experts_per_token * _weighted_output_bytes(
        arch, training) * h


def _grouped_experts(arch: ModelArch) -> bool:
    """An MoE whose experts run transformers' grouped-mm implementation (not Llama 4's bmm over all experts)."""
    return arch.is_moe and arch.router is not Router.TOPK_SIGMOID


def _weighted_output_bytes(arch: ModelArch, training: TrainingConfig) -> int:
    """Element size of the routing-weighted expert outputs: the experts' dtype (fp32 masters under full
    fine-tuning in *-mixed) promoted with the routing weights' (`router_saved` says which: fp32 for
    Mixtral's; PhiMoE's and DeepSeek's follow autocast's softmax / sigmoid)."""
    p = training.precision
    experts = p.param_bytes if training.method is Method.FULL else p.compute_bytes
    weights = {Router.SOFTMAX_TOPK: 4 if arch.router_weights_fp32 else p.compute_bytes,
               Router.SPARSEMIXER: 4 if p.is_mixed else p.compute_bytes,
               Router.SIGMOID: 2 if p.is_mixed else 4}.get(arch.router, p.compute_bytes)
    return max(experts, weights)


def moe_forward_temporary_bytes_per_token(arch: ModelArch, training: TrainingConfig) -> int:
    """What a grouped-mm MoE block holds beside what it saves at the end of its experts' forward
    (transformers' grouped_mm_experts_forward), per token: the routing-weighted expert outputs and
    their copy in token order, k rows each (the product of the experts' dtype and the routing
    weights' dtype: fp32 for Mixtral's weights), and, with frozen experts and router, which save
    nothing of it, the block input and its gathered copy. Its locals live until the function
    returns, so these are alive together. It does not shrink with tensor parallelism: split by
    expert, every rank runs all tokens x top-k rows (`routed_expert_width`), which can put the
    step's peak here."""
    if not _grouped_experts(arch):
        return 0
    c, h, k = training.precision.compute_bytes, arch.hidden_size, arch.experts_per_token
    frozen = training.method is not Method.FULL
    return k * 2 * _weighted_output_bytes(arch, training) * h + (k + 1) * c * h * frozen


def moe_layer_locals_bytes_per_token(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan) -> int:
    """What the decoder layer itself holds while its grouped-mm MoE block runs, beside the block's
    temporaries (`moe_forward_temporary_bytes_per_token`), per token. The layer's forward
    (`residual = h; h = norm(h); h = mlp(h); h = residual + h`) keeps two locals alive meanwhile:
      * the residual, the stream after attention, which nothing saves when the post-attention norm
        upcasts it into an fp32 copy of its own: a 16-bit stream (LoRA's, or pure bf16) read by an
        RMSNorm, or by a LayerNorm under autocast. An fp32 stream, or a LayerNorm reading its input's
        own dtype, keeps that very tensor (counted in the layer's norms);
      * under sequence parallelism the norm's output, a sequence shard: the block all-gathers it and
        reads the gathered copy (the block input, counted by the block or saved by its readers).
        Without it the norm's output is the block input itself.
    Under sequence parallelism both are the rank's sequence shard (1 / tp per token)."""
    if not _grouped_experts(arch):
        return 0
    h, stream = arch.hidden_size, checkpointed_input_bytes(arch, training)
    layer_norm = arch.norm is Norm.LAYER
    upcast_copy = stream == 2 and (not layer_norm or training.precision.is_mixed)
    locals_ = stream * h if upcast_copy else 0
    if plan.sequence_parallel:
        normalised = 4 if layer_norm and training.precision.is_mixed else stream  # autocast's layer_norm is fp32
        locals_ = (locals_ + normalised * h) // plan.tp
    return locals_


def outside_layers_bytes_per_token(arch: ModelArch, training: TrainingConfig, first: bool, last: bool,
                                   seq: int = 0, recompute: Recompute = Recompute.NONE) -> int:
    """Saved tensors outside the decoder layers: on the first stage the token ids and labels
    (int64, with the loss's padded and shifted copies) and an embedding dropout mask; on the last stage the final
    norm and the LM head's input (its own 16-bit cast under autocast) when the head trains.
    A profiled family's are measured; the first stage's share is the ids' (formula)."""
    if arch.profile_key:
        ids = _first_stage_bytes_per_token(arch)
        profile = activation_profile(arch, training, seq)
        measured = round(profile.outside_checkpointed_per_token if recompute is Recompute.FULL
                         else profile.outside_per_token)
        return (ids if first else 0) + (measured - ids if last else 0)
    total = eager_masks_checkpointed_bytes_per_token(arch, training, seq) if recompute.checkpoints_layers else 0
    cast = 2 if training.precision.is_mixed else training.precision.compute_bytes
    trains = training.method is Method.FULL
    if first:
        total += _first_stage_bytes_per_token(arch)
        if arch.embed_proj_dim and trains:  # OPT-350m's project_in keeps the narrow embedding
            total += cast * arch.embed_proj_dim
    if last:
        total += norm_saved(arch, training) if arch.final_norm else 0
        if trains:
            total += cast * (arch.embed_proj_dim or arch.hidden_size)
            if arch.embed_proj_dim:  # project_out keeps its hidden-wide input
                total += cast * arch.hidden_size
    return total


def sequence_parallel_saving_bytes_per_token(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan,
                                             last: bool) -> int:
    """What sequence parallelism takes off `outside_layers_bytes_per_token`: the final norm runs on
    the rank's sequence shard, so it keeps norm_saved / tp per token instead of norm_saved (the
    worker's SequenceParallel final norm; the LM head then all-gathers its input, kept whole).
    A profiled family's outside bytes are measured unsharded: no saving is claimed for it."""
    if not (plan.sequence_parallel and last and arch.final_norm) or arch.profile_key:
        return 0
    saved = norm_saved(arch, training)
    return saved - saved // plan.tp


def eager_masks_checkpointed_bytes_per_token(arch: ModelArch, training: TrainingConfig, seq: int) -> int:
    """gpt-oss (eager attention only) builds a 4-D additive mask per layer kind, (b, 1, s, s) in the
    model's dtype: the sliding-window one and the causal one. Without recomputation no op keeps them
    (adding a mask saves nothing); under full recomputation every checkpointed layer keeps its inputs,
    the masks among them, until backward."""
    if not arch.attention_sinks:
        return 0
    kinds = 2 if arch.sliding_window and 0 < arch.global_layers < arch.num_layers else 1
    p = training.precision
    return kinds * (p.param_bytes if training.method is Method.FULL else p.compute_bytes) * seq


def _first_stage_bytes_per_token(arch: ModelArch) -> int:
    """Token ids, labels (their own tensor: a fine-tune masks the prompt), the loss's padded and
    shifted labels (int64 each), and an embedding dropout mask."""
    return 8 * 4 + (arch.hidden_size if arch.hidden_dropout > 0 else 0)


def first_layer_unsaved_bytes_per_token(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan,
                                        seq: int) -> int:
    """With a frozen base (LoRA) the first layer's input does not require grad, so what only that
    input feeds keeps nothing: the first norm, and in parallel-residual layers the whole MLP branch
    unless the MLP carries adapters. (Under recomputation the checkpoint makes the input require grad.)
    Under full recomputation, when a LayerNorm's fp32 output only reaches the stream inside the
    layers (not BLOOM's embedding norm), the first checkpoint is the 16-bit frozen embedding's output
    while the others are fp32. A profiled family's first layer is measured against the other layers
    of its kind."""
    if arch.profile_key:
        if plan.recompute is not Recompute.NONE:
            return 0
        return -round(activation_profile(arch, training, seq).first_layer_delta.at(seq, plan.micro_batch))
    if training.method is Method.FULL:
        return 0
    if plan.recompute.checkpoints_layers and checkpointed_input_bytes(arch, training) == 4 and not arch.embedding_norm:
        return 2 * checkpoint_bytes_per_token(arch, training, plan) // 4
    if plan.recompute is not Recompute.NONE:
        return 0
    # post-norm layers (OLMo 2) normalise sublayer outputs only: no norm reads the layer input; under
    # sequence parallelism a norm keeps its sequence shard (as layer_inventory counts it)
    norm = norm_saved(arch, training) // (plan.tp if plan.sequence_parallel else 1)
    unsaved = norm if arch.post_sublayer_norms < arch.norms_per_layer else 0
    if arch.qk_norm:  # a q/k norm behind a projection without an adapter reads a tensor without grad
        unsaved += qk_norm_saved(arch, training, plan, {"q", "k"} - training.trainable_targets)
    if arch.parallel_residual and arch.norms_per_layer > 1 and not _norms_share_input(arch, training):
        unsaved += norm  # the MLP's norm reads the layer input too
    if arch.parallel_residual and not training.trainable_targets & {"gate", "up", "down"}:
        mlp = mlp_saved(arch, training, plan)
        unsaved += mlp["mlp_body"] + mlp.get("mlp_dropout_mask", 0)
    return unsaved


def embedding_leaf_bytes_per_token(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan) -> int:
    """A frozen embedding under full recomputation: transformers makes its output require grad
    (`enable_input_require_grads`), which turns the output into a leaf that its AccumulateGrad node
    keeps alive until backward. When the model transforms it before the first layer (embedding
    dropout, Granite's scaling) the leaf is a tensor of its own beside the first checkpoint."""
    if training.method is Method.FULL or not plan.recompute.checkpoints_layers:
        return 0
    if arch.hidden_dropout > 0 or arch.embedding_scaled:
        return training.precision.compute_bytes * arch.hidden_size
    return 0


def logits_bytes_per_token(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan) -> tuple[int, int, int]:
    """(forward peak, kept after forward, backward peak) of the LM head output and the loss.

    HF's ForCausalLMLoss upcasts logits to fp32 and runs cross_entropy = log_softmax + nll_loss:
    forward holds the 16-bit logits, the fp32 copy and the fp32 log-probs (2 + 4 + 4 B per vocab
    entry; 4 + 4 in fp32); only the log-probs survive the forward (the training loop drops the
    model output before backward). Backward holds the log-probs, their gradient and the fp32 logits
    gradient at once (12 B), then the 16-bit gradient. A final logit soft-cap (Gemma 2) adds the
    capped copies and keeps the tanh output."""
    vocab = arch.vocab_size // plan.tp
    c = training.precision.compute_bytes
    forward = (c if c == 2 else 0) * vocab + 8 * vocab
    kept = 4 * vocab
    backward = 12 * vocab
    if arch.logit_softcap:  # logits / cap, tanh (kept), * cap: 16-bit copies before the fp32 upcast
        forward += 2 * c * vocab
        kept += c * vocab
        backward += c * vocab
    return forward, kept, backward

"""Tensor and sequence parallelism in the worker: the family's rule (frenzy.core.tensor_parallel)
applied with DTensor's parallel styles.

Layout of one decoder layer over a tp group (Megatron-LM; Korthikanti et al. 2022 for sequence
parallelism):
  * column-parallel projections (q, k, v, gate, up) hold out_features / tp rows, row-parallel ones
    (o, down) in_features / tp columns; their outputs are all-reduced (tp only) or reduce-scattered
    along the sequence (tp + sp);
  * the embedding and the LM head hold vocab / tp rows; the loss runs on the vocabulary shards
    (torch's loss parallel: every rank reduces max and sum-exp over the group, no rank holds all
    logits); a tied head shares the embedding's shard;
  * routed experts (fused 3-D tensors) are split by expert: num_experts / tp per rank, the partial
    outputs all-reduced, the gradient of the block input and of the routing weights all-reduced;
  * sequence parallelism: between blocks the residual stream is a DTensor sharded on the sequence
    (dim 1), the norms run on the shards (SequenceParallel, replicated weights whose gradients are
    reduced over the group), and each attention / MLP block all-gathers its normalised input.

LoRA adapters follow their base projection so that the adapted output is split exactly like the base
output (W x + B A x, with the same shard of the output on every rank):
  * column-parallel base: A (r x in) stays whole on every rank, B (out x r) is split on its rows like
    W; the gradient of A's output is all-reduced by B's column-parallel input, so A's gradient is the
    same on every rank;
  * row-parallel base: A is split on its columns like W (its output all-reduced, or reduce-scattered
    under sequence parallelism), B stays whole (a replicated DTensor under sequence parallelism, whose
    gradient from the sequence shards is reduced over the group).
The export gathers every adapter tensor (train/export.py), so the adapter is a normal peft adapter.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import (ColwiseParallel, ParallelStyle, RowwiseParallel, SequenceParallel,
                                               parallelize_module)

from frenzy.core.tensor_parallel import TP_RULES, TensorParallelRule, hf_config_tp_unsupported_reason
from frenzy.train.layers import decoder_layers

SEQUENCE_DIM = 1


def parallelize(model: nn.Module, mesh: DeviceMesh, family: str, sequence_parallel: bool) -> None:
    """Split `model` (a transformers causal LM, or a peft model around one) in place over `mesh`."""
    hf = model.get_base_model() if hasattr(model, "get_base_model") else model
    reason = hf_config_tp_unsupported_reason(family, hf.config.to_dict(), mesh.size())
    if reason:
        raise ValueError(reason)
    rule = TP_RULES[family]
    trains = {name: param.requires_grad for name, param in model.named_parameters()}
    for layer in decoder_layers(hf):
        _parallelize_layer(layer, mesh, rule, sequence_parallel)
    _parallelize_vocabulary(hf, mesh, sequence_parallel)
    for name, param in model.named_parameters():  # SequenceParallel's replicas would train a frozen norm
        param.requires_grad_(trains[name])
    _reduce_partial_gradients(model)


def _reduce_partial_gradients(model: nn.Module) -> None:
    """A replicated weight applied to sequence shards (a norm, LoRA's B under sequence parallelism)
    gets each rank's partial gradient (Partial placement); it is summed over the group as soon as it
    is accumulated, so gradient clipping and the optimizer see the weight's whole gradient (torch's
    norm of a Partial DTensor is not the norm of the sum)."""

    def reduce(param: torch.Tensor) -> None:
        if isinstance(param.grad, DTensor) and param.grad.placements != param.placements:
            param.grad = param.grad.redistribute(param.device_mesh, param.placements)

    for param in model.parameters():
        if param.requires_grad and isinstance(param, DTensor) and all(p.is_replicate() for p in param.placements):
            param.register_post_accumulate_grad_hook(reduce)


def _parallelize_layer(layer: nn.Module, mesh: DeviceMesh, rule: TensorParallelRule, sp: bool) -> None:
    routed = rule.experts is not None and has_submodule(layer, rule.experts)
    plan: dict[str, ParallelStyle] = {}
    for name in rule.colwise:
        if has_submodule(layer, name):
            plan.update(_column(layer, name))
    for name in rule.rowwise:
        if has_submodule(layer, name):
            # inside an MoE block the output joins the experts' all-reduced (replicated) output
            scatter = sp and not (routed and name.startswith(rule.mlp + "."))
            plan.update(_row(layer, name, scatter))
    if sp:
        plan.update({name: SequenceParallel() for name, child in layer.named_children() if _is_norm(child)})
    parallelize_module(layer, mesh, plan)
    if routed:
        _split_experts(layer.get_submodule(rule.experts), mesh)
    if sp:
        _gather_block_input(layer.get_submodule(rule.attention), mesh, Shard(SEQUENCE_DIM))
        _gather_block_input(layer.get_submodule(rule.mlp), mesh, Replicate() if routed else Shard(SEQUENCE_DIM))


def has_submodule(module: nn.Module, name: str) -> bool:
    try:
        module.get_submodule(name)
    except AttributeError:
        return False
    return True


def _is_norm(module: nn.Module) -> bool:
    return "norm" in type(module).__name__.lower()


def _lora_parts(layer: nn.Module, name: str) -> tuple[str, list[str], list[str]] | None:
    """(base, A modules, B modules) of a peft LoRA layer at `name`, as module names; None if plain."""
    module = layer.get_submodule(name)
    if not (hasattr(module, "base_layer") and hasattr(module, "lora_A")):
        return None
    return (f"{name}.base_layer", [f"{name}.lora_A.{a}" for a in module.lora_A],
            [f"{name}.lora_B.{b}" for b in module.lora_B])


def _column(layer: nn.Module, name: str) -> dict[str, ParallelStyle]:
    parts = _lora_parts(layer, name)
    if parts is None:
        return {name: ColwiseParallel()}
    base, _a, b = parts  # A stays whole on every rank (see the module docstring)
    return {base: ColwiseParallel(), **{m: ColwiseParallel() for m in b}}


def _row(layer: nn.Module, name: str, scatter: bool) -> dict[str, ParallelStyle]:
    out = Shard(SEQUENCE_DIM) if scatter else Replicate()
    parts = _lora_parts(layer, name)
    if parts is None:
        return {name: RowwiseParallel(output_layouts=out)}
    base, a, b = parts
    plan: dict[str, ParallelStyle] = {base: RowwiseParallel(output_layouts=out),
                                      **{m: RowwiseParallel(output_layouts=out) for m in a}}
    if scatter:  # B reads sequence shards: a replicated DTensor, its gradient reduced over the group
        plan.update({m: SequenceParallel(use_local_output=True) for m in b})
    return plan


def _gather_block_input(block: nn.Module, mesh: DeviceMesh, output: Shard | Replicate) -> None:
    """Sequence parallelism around an attention or MLP block: its input (the sequence-sharded
    normalised stream) is all-gathered into a plain tensor; its output (local sequence shards after
    the row-parallel reduce-scatter, or a replicated MoE output) goes back as a sequence-sharded DTensor."""

    def gather(_module, args, kwargs):
        if "hidden_states" in kwargs:
            kwargs["hidden_states"] = _replicated_local(kwargs["hidden_states"])
        else:
            args = (_replicated_local(args[0]), *args[1:])
        return args, kwargs

    def scatter(_module, _args, _kwargs, result):
        first = result[0] if isinstance(result, tuple) else result
        sharded = DTensor.from_local(first, mesh, [output], run_check=False)
        if not isinstance(output, Shard):
            sharded = sharded.redistribute(mesh, [Shard(SEQUENCE_DIM)])
        return (sharded, *result[1:]) if isinstance(result, tuple) else sharded

    block.register_forward_pre_hook(gather, with_kwargs=True)
    block.register_forward_hook(scatter, with_kwargs=True)


def _replicated_local(x: torch.Tensor) -> torch.Tensor:
    return x.redistribute(x.device_mesh, [Replicate()]).to_local() if isinstance(x, DTensor) else x


def _parallelize_vocabulary(hf: nn.Module, mesh: DeviceMesh, sp: bool) -> None:
    """Embedding rows and LM-head rows split on the vocabulary, the loss on the shards; a tied head
    shares the embedding's shard."""
    from torch.distributed.tensor.parallel.loss import _enable_custom_loss_ops

    embedding, head = hf.get_input_embeddings(), hf.get_output_embeddings()
    tied = head.weight is embedding.weight
    stream = Shard(SEQUENCE_DIM) if sp else Replicate()
    # Under sequence parallelism the stream stays a DTensor, so the model's code sees the global
    # sequence length (positions, masks) while each rank holds its shard.
    parallelize_module(embedding, mesh, RowwiseParallel(input_layouts=Replicate(), output_layouts=stream,
                                                        use_local_output=not sp))
    parallelize_module(head, mesh, ColwiseParallel(input_layouts=stream, output_layouts=Shard(-1),
                                                   use_local_output=False))
    if tied:
        head.weight = embedding.weight
    if sp:
        final = hf.get_decoder().norm
        parallelize_module(final, mesh, SequenceParallel())
    # The loss's backward runs outside any context the model could enter (in the training loop), so
    # the vocabulary-parallel cross-entropy ops are registered for the process (torch's
    # loss_parallel() registers the same handlers for its duration).
    _enable_custom_loss_ops()
    hf.loss_function = _vocabulary_parallel_loss


def _vocabulary_parallel_loss(logits, labels, vocab_size: int, **kwargs) -> torch.Tensor:
    """transformers' causal-LM loss on vocabulary-sharded logits; a plain (replicated) scalar."""
    from transformers.loss.loss_utils import ForCausalLMLoss

    loss = ForCausalLMLoss(logits, labels, vocab_size, **kwargs)
    return loss.to_local() if isinstance(loss, DTensor) else loss


# ---------------------------------------------------------------- routed experts


def _split_experts(experts: nn.Module, mesh: DeviceMesh) -> None:
    """num_experts / tp whole experts per rank (the fused 3-D tensors sharded on dim 0); the forward
    runs transformers' own expert loop on the local experts with the routing remapped to them."""
    size, rank = mesh.size(), mesh.get_local_rank()
    total = experts.num_experts
    local = total // size
    first = rank * local
    for name, param in list(experts.named_parameters(recurse=False)):
        sharded = distribute_tensor(param.data, mesh, [Shard(0)])
        experts.register_parameter(name, nn.Parameter(sharded, requires_grad=param.requires_grad))
    forward = experts.forward  # the class's, bound

    def local_forward(hidden_states, top_k_index, top_k_weights, *args, **kwargs):
        hidden_states = _all_reduced_gradient(hidden_states, mesh)
        top_k_weights = _all_reduced_gradient(top_k_weights, mesh)
        index, top_k_weights = local_routing(top_k_index, top_k_weights, first, local)
        with _local_parameters(experts, local):
            partial = forward(hidden_states, index, top_k_weights, *args, **kwargs)
        return DTensor.from_local(partial, mesh, [Partial()], run_check=False).redistribute(
            mesh, [Replicate()]).to_local()

    experts.forward = local_forward


def local_routing(top_k_index: torch.Tensor, top_k_weights: torch.Tensor, first: int,
                  local: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The routing of one rank holding experts [first, first + local): its experts renumbered from 0,
    another rank's expert the sentinel index `local` with a zero routing weight (transformers'
    expert-parallel convention, which every experts implementation skips). The tracer routes its
    rank the same way (frenzy.memory.trace.experts)."""
    mine = (top_k_index >= first) & (top_k_index < first + local)
    index = torch.where(mine, top_k_index - first, torch.full_like(top_k_index, local))
    return index, top_k_weights.masked_fill(~mine, 0.0)


def _all_reduced_gradient(x: torch.Tensor, mesh: DeviceMesh) -> torch.Tensor:
    """x itself forward; backward, the sum of the ranks' gradients (each rank's experts see all tokens)."""
    return DTensor.from_local(x, mesh, [Replicate()], run_check=False).to_local(grad_placements=[Partial()])


@contextmanager
def _local_parameters(experts: nn.Module, local: int):
    """The experts' DTensor parameters as their local shards (views that carry gradients back)."""
    saved = dict(experts._parameters)
    total, parallel = experts.num_experts, getattr(experts, "_is_expert_parallel", False)
    try:
        for name, param in saved.items():
            if isinstance(param, DTensor):
                experts._parameters[name] = param.to_local()
        experts.num_experts, experts._is_expert_parallel = local, True
        yield
    finally:
        experts._parameters.update(saved)
        experts.num_experts, experts._is_expert_parallel = total, parallel

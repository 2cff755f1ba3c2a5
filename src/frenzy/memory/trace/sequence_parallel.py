"""Sequence parallelism on one traced rank: the tensor shapes the worker's split
(frenzy.train.tensor_parallel) gives rank 0, on the one-rank shard build.shard_config builds.

Where the worker communicates, the trace allocates what the collective returns:
  * reduce-scatter (the embedding's output, every row-parallel projection's output, an MoE block's
    replicated output): a new (batch, seq / tp, hidden) tensor, the rank's sequence shard;
  * all-gather (the input of every attention and MLP block, the LM head's input): a new
    (batch, seq, hidden) tensor, which the block's projections then keep for backward.
So the residual stream, the norms and what they keep are sequence shards, while the projections
keep the gathered input (torch's DTensor does not re-gather it in backward, unlike Megatron-LM).
Positions are the whole sequence's (the worker's DTensor stream reports the global length).
The collectives' transient buffers are not traced.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from frenzy.core.tensor_parallel import TP_RULES
from frenzy.train.tensor_parallel import has_submodule

SEQUENCE_DIM = 1


def emulate(model: nn.Module, layers: nn.ModuleList, family: str, tp: int, seq_len: int) -> list[RemovableHandle]:
    """Hooks that shard the stream of `model` (one rank's build) as the worker does; remove them after."""
    if seq_len % tp:
        raise ValueError(f"sequence parallelism needs seq_len divisible by tp, not {seq_len} over {tp}")
    rule = TP_RULES[family]
    shard = seq_len // tp
    handles = [model.register_forward_pre_hook(_whole_positions(seq_len), with_kwargs=True),
               model.get_input_embeddings().register_forward_hook(_scatter(shard)),
               model.get_output_embeddings().register_forward_pre_hook(_gather(tp), with_kwargs=True)]
    for layer in layers:
        routed = rule.experts is not None and has_submodule(layer, rule.experts)
        for block in (rule.attention, rule.mlp):
            handles.append(layer.get_submodule(block).register_forward_pre_hook(_gather(tp), with_kwargs=True))
        if routed:
            handles.append(layer.get_submodule(rule.mlp).register_forward_hook(_scatter(shard)))
        for name in rule.rowwise:
            if has_submodule(layer, name) and not (routed and name.startswith(rule.mlp + ".")):
                handles += [m.register_forward_hook(_scatter(shard)) for m in _row_outputs(layer.get_submodule(name))]
    return handles


def _row_outputs(module: nn.Module) -> list[nn.Module]:
    """What the worker reduce-scatters: the projection's output, or with LoRA its base layer's and
    its A's (B then runs on the shard)."""
    if hasattr(module, "base_layer") and hasattr(module, "lora_A"):
        return [module.base_layer, *module.lora_A.values()]
    return [module]


def _scatter(shard: int):
    def hook(_module, _args, output):
        first = output[0] if isinstance(output, tuple) else output
        local = first.narrow(SEQUENCE_DIM, 0, shard).clone()
        return (local, *output[1:]) if isinstance(output, tuple) else local
    return hook


def _gather(tp: int):
    def gathered(x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x] * tp, dim=SEQUENCE_DIM)

    def hook(_module, args, kwargs):
        if "hidden_states" in kwargs:
            kwargs["hidden_states"] = gathered(kwargs["hidden_states"])
        else:
            args = (gathered(args[0]), *args[1:])
        return args, kwargs
    return hook


def _whole_positions(seq_len: int):
    def hook(_module, args, kwargs):
        kwargs.setdefault("position_ids", torch.arange(seq_len).unsqueeze(0))
        return args, kwargs
    return hook

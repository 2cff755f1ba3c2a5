"""Routed experts on one traced tensor-parallel rank: the worker's split by expert
(frenzy.train.tensor_parallel._split_experts) on rank 0 of the fake-tensor build.

The rank holds num_experts / tp whole experts (the first ones: rank 0's shard of the fused 3-D
tensors on dim 0), sees every token, and routes a choice of another rank's expert to the sentinel
index with a zero weight (frenzy.train.tensor_parallel.local_routing, the worker's own function),
so transformers' experts implementation runs as the worker runs it. With the default grouped-mm
experts every rank then sorts, gathers and multiplies all tokens x top-k rows at the expert's whole
width: the sentinel rows are skipped by the kernel, not left out of its tensors, so the rank keeps
what one unsplit rank keeps (and the sentinel masks) while holding 1/tp of the expert weights.
The all-reduce of the partial outputs returns a tensor the size of the block's output, in place of
the partial one; its transient buffers are not traced.
"""

from __future__ import annotations

import torch
from torch import nn

from frenzy.core.tensor_parallel import TP_RULES, splits_by_expert
from frenzy.train.tensor_parallel import has_submodule, local_routing


def routed_width_key(cfg: dict, family: str) -> str | None:
    """The config key of the routed experts' width, which the split by expert leaves whole: the MoE
    width where the family has a dense width beside it (Qwen-MoE's `moe_intermediate_size`), else
    `intermediate_size` (Mixtral, PhiMoE, gpt-oss); None for a family without routed experts."""
    if not splits_by_expert(family):
        return None
    return "moe_intermediate_size" if cfg.get("moe_intermediate_size") else "intermediate_size"


def split_by_expert(layers: nn.ModuleList, family: str, tp: int) -> None:
    """Keep rank 0's num_experts / tp experts in every MoE layer of `layers` (one rank's build, made
    with the routed width whole: build.shard_config) and route to them as the worker does."""
    if tp == 1 or not splits_by_expert(family):
        return
    rule = TP_RULES[family]
    for layer in layers:
        if has_submodule(layer, rule.experts):
            _keep_local_experts(layer.get_submodule(rule.experts), tp)


def _keep_local_experts(experts: nn.Module, tp: int) -> None:
    if experts.num_experts % tp:
        raise ValueError(f"{experts.num_experts} experts do not split over tp={tp}")
    local = experts.num_experts // tp
    for name, param in list(experts.named_parameters(recurse=False)):
        shard = torch.empty((local, *param.shape[1:]), dtype=param.dtype, device=param.device)
        experts.register_parameter(name, nn.Parameter(shard, requires_grad=param.requires_grad))
    experts.num_experts, experts._is_expert_parallel = local, True
    forward = experts.forward

    def local_forward(hidden_states, top_k_index, top_k_weights, *args, **kwargs):
        index, weights = local_routing(top_k_index, top_k_weights, 0, local)
        return forward(hidden_states, index, weights, *args, **kwargs)

    experts.forward = local_forward

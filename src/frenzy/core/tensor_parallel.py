"""How each model family is split over a tensor-parallel group: the one rule table that the training
worker (frenzy.train.tensor_parallel) applies with DTensor and that the fake-tensor tracer
(frenzy.memory.trace.build.shard_config) mirrors by building one rank's shard, and that the planner
(frenzy.core.worker_support) asks which families the worker runs.

The split is Megatron-LM's (Shoeybi et al. 2019): in every decoder layer the projections that read
the layer's normalised input are split on their output features (column-parallel: q, k, v, gate,
up), the projections that write back to the residual stream on their input features (row-parallel:
o, down), so a layer needs one all-reduce per block forward (a reduce-scatter / all-gather pair
under sequence parallelism). The embedding is split on the vocabulary (row-parallel) and so is the
LM head (column-parallel), and the loss is computed on the vocabulary shards (loss parallel).
A routed-expert MLP, whose experts transformers stores as fused 3-D tensors, is split by expert:
each rank holds num_experts / tp whole experts, sees every token and routes another rank's choices
to a sentinel with zero weight, and the ranks' partial outputs are all-reduced. That is the parameter
bytes of splitting every expert's width, but not its activation bytes: transformers' grouped-mm
experts run every rank over all tokens x top-k rows at the whole expert width (the tracer builds
this split, MARP counts it: docs/MEMORY_MODEL.md).

Pure data: no torch here (core imports neither torch nor transformers).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorParallelRule:
    """Module names relative to a decoder layer. `attention` and `mlp` are the blocks whose input is
    gathered (sequence parallelism) and whose output goes back to the residual stream; `experts` the
    routed experts of an MoE block (split by expert); `worker_reason`, when set, says why the worker
    does not run the family although the tracer splits it."""

    colwise: tuple[str, ...]
    rowwise: tuple[str, ...]
    attention: str = "self_attn"
    mlp: str = "mlp"
    experts: str | None = None
    worker_reason: str | None = None

    def __post_init__(self):
        if set(self.colwise) & set(self.rowwise):
            raise ValueError(f"a projection is both column- and row-parallel: {set(self.colwise) & set(self.rowwise)}")


_ATTENTION_COL = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")
_ATTENTION_ROW = ("self_attn.o_proj",)
_GATED_COL = ("mlp.gate_proj", "mlp.up_proj")
_GATED_ROW = ("mlp.down_proj",)
# Qwen2-MoE's shared expert beside the routed ones (and the dense MLP of its mlp_only_layers)
_SHARED_COL = ("mlp.shared_expert.gate_proj", "mlp.shared_expert.up_proj")
_SHARED_ROW = ("mlp.shared_expert.down_proj",)

_DENSE = TensorParallelRule(colwise=_ATTENTION_COL + _GATED_COL, rowwise=_ATTENTION_ROW + _GATED_ROW)
# MoE families: routed experts by expert; a dense layer among them (Qwen3-MoE's mlp_only_layers) by the
# gated rule (a rule names modules a layer may lack: it applies to those the layer has)
_MOE = TensorParallelRule(colwise=_ATTENTION_COL + _GATED_COL, rowwise=_ATTENTION_ROW + _GATED_ROW,
                          experts="mlp.experts")
_FUSED_GATE_UP = ("its MLP computes gate and up in one fused projection: a column split would hand gate to "
                  "one rank and up to another, and torch.distributed.checkpoint cannot save the interleaved shard")

TP_RULES: dict[str, TensorParallelRule] = {
    **dict.fromkeys(("llama", "mistral", "qwen2", "qwen3", "granite", "smollm3", "gemma3_text", "cohere",
                     "cohere2"), _DENSE),
    "starcoder2": TensorParallelRule(colwise=_ATTENTION_COL + ("mlp.c_fc",), rowwise=_ATTENTION_ROW + ("mlp.c_proj",)),
    **dict.fromkeys(("mixtral", "qwen3_moe", "phimoe"), _MOE),
    "qwen2_moe": TensorParallelRule(colwise=_ATTENTION_COL + _GATED_COL + _SHARED_COL,
                                    rowwise=_ATTENTION_ROW + _GATED_ROW + _SHARED_ROW, experts="mlp.experts"),
    "glm4": TensorParallelRule(colwise=_ATTENTION_COL, rowwise=_ATTENTION_ROW, worker_reason=_FUSED_GATE_UP),
    "gpt_oss": TensorParallelRule(
        colwise=_ATTENTION_COL, rowwise=_ATTENTION_ROW, experts="mlp.experts",
        worker_reason="its per-head attention sinks and interleaved fused expert projections (with biases) "
                      "have no split in the worker"),
    **dict.fromkeys(("llama4_text", "llama4"), TensorParallelRule(
        colwise=_ATTENTION_COL, rowwise=_ATTENTION_ROW,
        worker_reason="its experts take their routing in another form (scores over all experts) and its "
                      "chunked attention is not split in the worker")),
}


def worker_tp_families() -> frozenset[str]:
    """Families whose split the worker runs."""
    return frozenset(family for family, rule in TP_RULES.items() if rule.worker_reason is None)


def splits_by_expert(family: str) -> bool:
    """Whether `family`'s routed experts are split by expert over a tensor-parallel group (whole
    experts per rank) rather than by width."""
    rule = TP_RULES.get(family)
    return rule is not None and rule.experts is not None


def tp_unsupported_reason(family: str, tp: int, *, heads: int, kv_heads: int, experts: int = 0,
                          qk_norm_full_width: bool = False) -> str | None:
    """None when the worker can split a `family` model over `tp` ranks; else why not. Heads and KV
    heads must divide by tp (the worker splits whole heads and does not replicate KV heads), and an
    MoE's experts too (split by expert); a q/k norm over the whole projection width (Cohere's
    use_qk_norm, OLMo 2) would need its weight split per head."""
    rule = TP_RULES.get(family)
    if rule is None:
        return f"the worker cannot tensor-parallelise {family} (no split rule for it)"
    if rule.worker_reason:
        return f"the worker cannot tensor-parallelise {family}: {rule.worker_reason}"
    if qk_norm_full_width:
        return (f"the worker cannot tensor-parallelise {family} with a q/k norm over every head "
                "(its weights are not split)")
    for name, count in (("attention heads", heads), ("key/value heads", kv_heads), ("experts", experts)):
        if count and count % tp:
            return f"{count} {name} do not split over tp={tp}"
    return None


def hf_config_tp_unsupported_reason(family: str, hf_config: dict, tp: int) -> str | None:
    """tp_unsupported_reason for a transformers config: whether the worker can build the split."""
    heads = hf_config.get("num_attention_heads") or 0
    return tp_unsupported_reason(family, tp, heads=heads, kv_heads=hf_config.get("num_key_value_heads") or heads,
                                 experts=hf_config.get("num_local_experts") or hf_config.get("num_experts") or 0,
                                 qk_norm_full_width=family == "cohere" and bool(hf_config.get("use_qk_norm")))

"""DeepSeek's decoder layers, bytes per token: multi-head latent attention (MLA) and the dense
gated MLP of the first `dense_layers` layers (transformers' deepseek_v2 / deepseek_v3).

MLA keeps, per token (autograd's saved tensors):
  * the projections' input: q_proj (or q_a_proj) and kv_a_proj_with_mqa read the normalised layer
    input, shared in pure precision, one autocast copy each under *-mixed (as `_input_saves`);
  * each latent RMSNorm (kv_a_layernorm over kv_lora_rank, q_a_layernorm over q_lora_rank) keeps
    what a norm of a 16-bit sublayer output keeps (its fp32 input, rstd and, when its weight trains,
    the 16-bit normalised tensor), and the up-projection after it (kv_b_proj, q_b_proj) its own
    input: the 16-bit norm output, or under autocast the cast of the fp32 one (fp32 weight x bf16);
  * the attention kernel's q and k: both new tensors of heads x (qk_nope + qk_rope), rebuilt with
    `cat` / `copy_` around the rotary part, and v, a view of kv_b_proj's output that keeps the whole
    heads x (qk_nope + v_head_dim) output alive. RoPE multiplies by cos/sin (or complex
    frequencies, V2) that need no gradient, so it keeps only the step's shared tables;
  * under SDPA the memory-efficient kernel (v narrower than q and k rules out flash) keeps its
    output, heads x v_head_dim, and an fp32 logsumexp per head; eager attention keeps the fp32
    probabilities and their 16-bit copy (`_eager_scores_saved`). Either output is laid out
    (b, heads, s, d), so o_proj gets (and keeps, when it trains) a transposed copy.
"""

from __future__ import annotations

from dataclasses import replace

from frenzy.core.model import Linear, ModelArch, TpSplit
from frenzy.core.plan import ParallelPlan
from frenzy.core.training import Attention, Method, Recompute, TrainingConfig
from frenzy.memory.layer_inventory import _eager_scores_saved, _o_input_saves, reader_saves


def _latent_norm_saved(training: TrainingConfig, width: int) -> int:
    """An RMSNorm over a 16-bit latent: fp32 input copy, rstd, and the normalised tensor its weight
    multiplies when that weight trains."""
    normalised = training.precision.compute_bytes if training.method is Method.FULL else 0
    return (4 + normalised) * width + 4


def mla_attention_saved(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan, seq: int) -> dict[str, int]:
    """MLA block of one layer, bytes per token (see the module docstring)."""
    c, heads = training.precision.compute_bytes, arch.num_heads
    by_name = {lin.name: lin for lin in arch.linears}
    qk_dim, v_dim = heads * arch.head_dim, heads * arch.v_head_dim
    kv_out = by_name["kv_b"].out_features
    q_reader = by_name["q_a"] if arch.mla_q_rank else by_name["q"]
    items = {"qkv_input": reader_saves(training, [q_reader, by_name["kv_a"]], arch.hidden_size),
             "qk_norm": _latent_norm_saved(training, arch.mla_kv_rank),
             "latent_input": reader_saves(training, [by_name["kv_b"]], arch.mla_kv_rank)}
    if arch.mla_q_rank:
        items["qk_norm"] += _latent_norm_saved(training, arch.mla_q_rank)
        items["latent_input"] += reader_saves(training, [by_name["q_b"]], arch.mla_q_rank)
    items["qkv"] = c * (2 * qk_dim + kv_out)
    if training.attention is Attention.EAGER:
        if plan.recompute is Recompute.NONE:
            items["scores"] = _eager_scores_saved(arch, training.precision) * heads * seq
    else:
        items["attn_out"] = c * v_dim + 4 * heads
    items["o_input"] = _o_input_saves(arch, training, v_dim, transposed=True)
    return items


def dense_layer_arch(arch: ModelArch) -> ModelArch:
    """One of the first dense layers as a layer of its own: MLA and a gated MLP of the dense width."""
    h, inter = arch.hidden_size, arch.dense_intermediate_size
    attention = [lin for lin in arch.linears if not lin.per_expert and not lin.name.startswith("shared_")]
    mlp = [Linear(name="gate", in_features=h, out_features=inter, bias=False, split=TpSplit.COLUMN,
                  targets=frozenset({"gate"})),
           Linear(name="up", in_features=h, out_features=inter, bias=False, split=TpSplit.COLUMN,
                  targets=frozenset({"up"})),
           Linear(name="down", in_features=inter, out_features=h, bias=False, split=TpSplit.ROW,
                  targets=frozenset({"down"}))]
    return replace(arch, linears=tuple(attention + mlp), intermediate_size=inter, num_experts=0, experts_per_token=0,
                   shared_expert_size=0, dense_layers=0)

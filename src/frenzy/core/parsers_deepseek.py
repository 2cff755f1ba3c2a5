"""Parsers of DeepSeek-V2 and DeepSeek-V3: multi-head latent attention (MLA) and an MoE block with
shared experts, after `first_k_dense_replace` dense layers (transformers' deepseek_v2 / deepseek_v3).

No tensor parallelism: MLA's latent projections (kv_a_proj_with_mqa, the q and kv low-rank norms)
are replicated, not split by heads, and the trace's shard_config divides heads and widths the
llama way only, so a DeepSeek rank could not be traced (it stays out of TP_FAMILIES).
"""

from __future__ import annotations

from frenzy.core.errors import InvalidConfigError
from frenzy.core.hf_blocks import COL, ROW, Config, common_fields, config_value, gated_mlp, projection
from frenzy.core.model import ModelArch, Router


def _mla_projections(cfg: Config, h: int, heads: int) -> list:
    """MLA as transformers builds it: q direct (q_proj) or low-rank (q_a_proj -> RMSNorm -> q_b_proj),
    the joint latent kv_a_proj_with_mqa (kv_lora_rank + a shared rope key), kv_b_proj expanding the
    normalised latent into every head's k (no-rope part) and v, and o_proj from heads x v_head_dim."""
    nope, rope, v_dim = (config_value(cfg, key) for key in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"))
    kv_rank, q_rank, bias = config_value(cfg, "kv_lora_rank"), cfg.get("q_lora_rank"), bool(cfg.get("attention_bias"))
    qk = heads * (nope + rope)
    if q_rank:
        q = [projection("q_a", h, q_rank, bias, COL, {"q"}), projection("q_b", q_rank, qk, False, COL, {"q"})]
    else:
        q = [projection("q", h, qk, False, COL)]
    return [*q, projection("kv_a", h, kv_rank + rope, bias, COL, {"k", "v"}),
            projection("kv_b", kv_rank, heads * (nope + v_dim), False, COL, {"k", "v"}),
            projection("o", heads * v_dim, h, bias, ROW)]


def _deepseek(cfg: Config, name: str, *, sigmoid_router: bool) -> ModelArch:
    if cfg.get("moe_layer_freq", 1) != 1:
        raise InvalidConfigError(f"{name}: moe_layer_freq {cfg['moe_layer_freq']} is not what transformers builds "
                                 "(every layer after first_k_dense_replace is MoE); set it to 1")
    base = common_fields(cfg, name)
    h, heads = base["hidden_size"], base["num_heads"]
    nope, rope, v_dim = (config_value(cfg, key) for key in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"))
    experts, k = config_value(cfg, "n_routed_experts", "num_local_experts"), config_value(cfg, "num_experts_per_tok")
    inter, dense_inter = config_value(cfg, "moe_intermediate_size"), config_value(cfg, "intermediate_size")
    shared = inter * int(cfg.get("n_shared_experts") or 0)
    dense = min(int(cfg.get("first_k_dense_replace") or 0), base["num_layers"])
    attention = _mla_projections(cfg, h, heads)
    linears = attention + gated_mlp(h, inter, per_expert=True)
    shared_linears = [projection(f"shared_{lin.name}", lin.in_features, lin.out_features, False, lin.split,
                                 {lin.name}) for lin in gated_mlp(h, shared)] if shared else []
    linears += shared_linears
    norms = 2 * h + config_value(cfg, "kv_lora_rank") + int(cfg.get("q_lora_rank") or 0)
    router = experts * h
    # The dense first layers' parameters against an MoE layer's: their gated MLP in place of the
    # shared experts (nn.Linear both), and no fused experts or router (neither nn.Linear).
    dense_mlp = sum(lin.params for lin in gated_mlp(h, dense_inter))
    routed = sum(lin.params * experts for lin in linears if lin.per_expert)
    base.update(num_kv_heads=heads, head_dim=nope + rope)
    return ModelArch(**base, intermediate_size=inter, linears=tuple(linears), rotary_dim=rope, rope_concat=True,
                     num_experts=experts, experts_per_token=k, shared_expert_size=shared, shared_expert_gate=False,
                     router=Router.SIGMOID if sigmoid_router else Router.SOFTMAX_TOPK,
                     router_fp32=True, router_norm_topk=bool(cfg.get("norm_topk_prob")) and sigmoid_router,
                     router_group_mask=not sigmoid_router and cfg.get("topk_method") == "group_limited_greedy",
                     layer_other_params=norms + router,
                     # V3's e_score_correction_bias: an fp32 buffer per MoE layer (counted on every layer)
                     buffer_bytes_per_layer=4 * experts if sigmoid_router else 0,
                     irregular_linear_params=dense * (dense_mlp - sum(lin.params for lin in shared_linears)),
                     irregular_other_params=-dense * (routed + router),
                     dense_layers=dense, dense_intermediate_size=dense_inter, v_head_dim=v_dim,
                     mla_kv_rank=config_value(cfg, "kv_lora_rank"), mla_q_rank=int(cfg.get("q_lora_rank") or 0),
                     attention_dropout=cfg.get("attention_dropout", 0.0), activation=cfg.get("hidden_act", "silu"))


def parse_deepseek_v2(cfg, name):
    """DeepSeek-V2 (and V2-Lite): MLA, a softmax router picking top-k greedily or group-limited
    (`topk_method`), weights scaled by routed_scaling_factor and never renormalised."""
    return _deepseek(cfg, name, sigmoid_router=False)


def parse_deepseek_v3(cfg, name):
    """DeepSeek-V3: MLA with the low-rank q, a sigmoid router with e_score_correction_bias and
    group-limited top-k (n_group, topk_group), top-k weights renormalised when `norm_topk_prob`."""
    return _deepseek(cfg, name, sigmoid_router=True)

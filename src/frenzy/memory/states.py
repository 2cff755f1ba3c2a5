"""Model states on one GPU: weights, gradients, optimizer state and the buffers around them.

Every function returns bytes for one rank of a plan, for the layers that rank's pipeline stage holds.
The sharding rules follow ZeRO (Rajbhandari et al., SC'20, Fig. 1): stage 1 shards optimizer state,
stage 2 also gradients, stage 3 also parameters, each divided by the data-parallel degree.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from frenzy.core.model import Linear, ModelArch, Router
from frenzy.core.plan import ParallelPlan
from frenzy.core.training import Method, Optimizer, Precision, TrainingConfig, ZeroStage

# bitsandbytes quantises optimizer state block-wise: 256-element blocks, one fp32 absmax each;
# tensors under 4096 elements keep 32-bit state (bnb `min_8bit_size`).
ADAM8BIT_BLOCK = 256
# NF4 (QLoRA, Dettmers et al. 2023): 4-bit codes, one absmax per 64-element block, itself quantised
# to 8 bits with one fp32 constant per 256 blocks (double quantisation): 0.5 + 1/64 + 4/16384 B/param.
NF4_BYTES_PER_PARAM = 0.5 + 1 / 64 + 4 / (64 * 256)


@dataclass(frozen=True, slots=True, kw_only=True)
class StageParams:
    """Parameter counts held by one rank (after tensor and pipeline splitting, before ZeRO)."""

    frozen_linear: int  # frozen base projections (LoRA/QLoRA): what QLoRA quantises
    frozen_other: int  # frozen embeddings, norms, head, fused MoE experts
    trainable: int  # full fine-tuning: everything; LoRA: the adapters only
    largest_tensor: int  # elements of the largest trainable tensor (per-tensor optimizer temporaries)
    layers: int
    matmul: int = 0  # parameters that feed matmuls (projections and the LM head): autocast casts them
    buffers: int = 0  # bytes of non-parameter buffers (replicated, never sharded)
    root: int = 0  # parameters outside the decoder layers (embedding, final norm, head): FSDP2's root unit

    @property
    def total(self) -> int:
        return self.frozen_linear + self.frozen_other + self.trainable


def lora_params(linear: Linear, rank: int, tp: int) -> int:
    """LoRA adds A (r x in) and B (out x r) to a targeted projection (Hu et al. 2021).

    Under tensor parallelism A of a row-parallel layer and B of a column-parallel layer are sharded.
    """
    return rank * (linear.in_features + linear.out_features) // tp


def stage_layer_range(num_layers: int, pp: int, stage: int) -> range:
    """The decoder layers pipeline stage `stage` of `pp` holds: an even split of consecutive layers,
    earlier stages taking the remainder (the training worker splits its model by this)."""
    base, extra = divmod(num_layers, pp)
    start = stage * base + min(stage, extra)
    return range(start, start + base + (1 if stage < extra else 0))


def layers_on_stage(arch: ModelArch, pp: int, stage: int) -> int:
    return len(stage_layer_range(arch.num_layers, pp, stage))


def stage_params(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan, stage: int) -> StageParams:
    return _stage_params(arch, training, plan.tp, plan.pp, stage)


@lru_cache(maxsize=4096)  # plan enumeration asks for the same (tp, pp, stage) many times
def _stage_params(arch: ModelArch, training: TrainingConfig, tp: int, pp: int, stage: int) -> StageParams:
    layers = layers_on_stage(arch, pp, stage)
    first, last = stage == 0, stage == pp - 1
    copies = {lin.name: (arch.num_experts if lin.per_expert else 1) for lin in arch.linears}
    # Layers unlike the common one (dense layers among MoE ones; profiled families) are spread evenly
    # over the stages. Their nn.Linear projections differ by irregular_linear_params; everything else,
    # fused experts included, by irregular_other_params (a dense layer's absent experts: negative).
    irregular_linear = arch.irregular_linear_params * layers // arch.num_layers // tp
    dense_layers = arch.dense_layers * layers // arch.num_layers
    linear = sum(lin.sharded_params(tp) * copies[lin.name] for lin in arch.linears) * layers + irregular_linear
    other = arch.layer_extra_params() * layers + arch.irregular_other_params * layers // arch.num_layers // tp
    if first:
        other += arch.embedding_params() // tp
    if last:
        other += arch.head_params() // tp
        if arch.tie_word_embeddings and pp > 1:
            other += arch.vocab_size * arch.hidden_size // tp  # the last stage keeps its own tied copy
    head = head_matmul_params(arch, tp)
    # transformers runs MoE experts through its own grouped-matmul op, which autocast does not cast
    # (Llama 4's experts are plain bmm's, which it does).
    experts_per_layer = sum(lin.sharded_params(tp) * copies[lin.name] for lin in arch.linears if lin.per_expert)
    dense = sum(lin.sharded_params(tp) for lin in arch.linears if not lin.per_expert) * layers + irregular_linear
    if arch.router is Router.TOPK_SIGMOID:
        dense += experts_per_layer * (layers - dense_layers)
    matmul = dense + (head if last else 0)
    buffers = arch.buffer_bytes_per_layer * layers
    root = other - arch.layer_extra_params() * layers - arch.irregular_other_params * layers // arch.num_layers // tp
    if training.method is Method.FULL:
        largest = max(arch.vocab_size * arch.hidden_size // tp if (first or last) else 0,
                      max((lin.sharded_params(tp) for lin in arch.linears), default=0))
        # what a text step never reads, spread over the stages like the irregular parameters
        unused = arch.unused_params * layers // arch.num_layers // tp
        return StageParams(frozen_linear=0, frozen_other=unused, trainable=linear + other - unused,
                           largest_tensor=largest, layers=layers, matmul=matmul, buffers=buffers, root=root)
    # transformers 5 stores MoE experts as fused 3-D parameters, not nn.Linear modules: peft adapts
    # none of them and bitsandbytes (QLoRA) leaves them 16-bit, like the other frozen non-projections.
    experts = experts_per_layer * layers  # a dense layer's absent experts are in irregular_other_params
    targets = training.trainable_targets
    adapters = [lin for lin in arch.linears if lin.targets & targets and not lin.per_expert]
    lora = sum(lora_params(lin, training.lora_rank, tp) for lin in adapters) * layers
    lora += _dense_layer_lora_delta(arch, training, tp) * dense_layers
    largest = max((lora_params(lin, training.lora_rank, tp) for lin in adapters), default=0)
    return StageParams(frozen_linear=linear - experts, frozen_other=other + experts, trainable=lora,
                       largest_tensor=largest, layers=layers, matmul=matmul + lora, buffers=buffers, root=root)


def _dense_layer_lora_delta(arch: ModelArch, training: TrainingConfig, tp: int) -> int:
    """Adapter parameters a Llama 4 dense layer has beyond the common (MoE) layer: its MLP projections
    are `dense_intermediate_size` wide where the shared expert's are `shared_expert_size`."""
    if not arch.dense_layers:
        return 0
    wider = (arch.dense_intermediate_size - arch.shared_expert_size) * training.lora_rank // tp
    return wider * sum(1 for lin in arch.linears if lin.name.startswith("shared_")
                       and lin.targets & training.trainable_targets)


def head_matmul_params(arch: ModelArch, tp: int) -> int:
    """Parameters of the LM head's matmul (weight and bias) on one tensor-parallel rank."""
    bias = arch.vocab_size if arch.lm_head_bias else 0
    return arch.vocab_size * (arch.embed_proj_dim or arch.hidden_size) // tp + bias


def zero_divisor(plan: ParallelPlan, stage: ZeroStage) -> int:
    """How many data-parallel ranks share a state that ZeRO stage `stage` shards. In the fsdp2-param
    mode FSDP2 shards parameters, gradients and optimizer state at every ZeRO stage (1/2 differ
    from 3 only in keeping the bf16 parameters gathered from forward to backward)."""
    return plan.dp if plan.zero >= stage or (plan.fsdp_param_dtype and plan.zero) else 1


def weight_bytes(params: StageParams, training: TrainingConfig, plan: ParallelPlan) -> int:
    """Stored parameters: trainable ones in the precision's storage dtype (fp32 masters for *-mixed),
    frozen base in bf16/fp32 (LoRA) or NF4 (QLoRA: nn.Linear projections only; embeddings, norms,
    head and fused MoE experts stay 16-bit); a full fine-tune's frozen parameters (what a text step
    never reads) keep the storage dtype. ZeRO-3 / FSDP full-shard divides everything by dp."""
    p = training.precision
    frozen_bytes = p.param_bytes if training.method is Method.FULL else 2 if p is not Precision.FP32 else 4
    if training.method is Method.QLORA:
        frozen = int(params.frozen_linear * NF4_BYTES_PER_PARAM) + params.frozen_other * frozen_bytes
    else:
        frozen = (params.frozen_linear + params.frozen_other) * frozen_bytes
    total = params.trainable * p.param_bytes + frozen
    return total // zero_divisor(plan, ZeroStage.PARAMETERS) + params.buffers


def gradient_bytes(params: StageParams, training: TrainingConfig, plan: ParallelPlan) -> int:
    """Gradients have their parameter's dtype (fp32 for *-mixed masters). ZeRO-2/3 keep a 1/dp shard."""
    return params.trainable * training.precision.param_bytes // zero_divisor(plan, ZeroStage.GRADIENTS)


def gradients_before_first_layer_bytes(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan,
                                       stage: int) -> int:
    """The gradients alive as backward enters the first layer's last block: all but that layer's
    (one layer's share of the layers' trainable parameters) and, on the first stage, the
    embedding's (a tied embedding's gradient is the head's, made at the loss)."""
    params = stage_params(arch, training, plan, stage)
    full = training.method is Method.FULL
    layer = (params.trainable - (params.root if full else 0)) // max(params.layers, 1)  # adapters: all in layers
    embedding = arch.embedding_params() // plan.tp if stage == 0 and full and not arch.tie_word_embeddings else 0
    trainable = params.trainable - layer - embedding
    return trainable * training.precision.param_bytes // zero_divisor(plan, ZeroStage.GRADIENTS)


def optimizer_state_bytes(params: StageParams, training: TrainingConfig, plan: ParallelPlan) -> int:
    """AdamW keeps exp_avg and exp_avg_sq in the parameter dtype: 8 B/param for fp32 masters (so
    mixed-precision Adam totals 4 + 4 + 8 = 16 B/param, plus 2 for the 16-bit weight copies: the
    16-18 B/param of ZeRO's paper), 4 B/param for pure bf16. 8-bit AdamW: two uint8 states plus one
    fp32 absmax per 256-element block each. SGD with momentum: one buffer."""
    n = params.trainable
    state_dtype = training.precision.param_bytes
    match training.optimizer:
        case Optimizer.ADAMW | Optimizer.ADAMW_FUSED:
            total = 2 * n * state_dtype
        case Optimizer.ADAMW_8BIT:
            total = 2 * (n + 4 * -(-n // ADAM8BIT_BLOCK))
        case Optimizer.SGD:
            total = n * state_dtype
    return total // zero_divisor(plan, ZeroStage.OPTIMIZER)


def optimizer_step_temporary_bytes(params: StageParams, training: TrainingConfig, plan: ParallelPlan) -> int:
    """Scratch memory inside optimizer.step().

    torch AdamW foreach (the CUDA default) computes `exp_avg_sq_sqrt = _foreach_sqrt(exp_avg_sqs)`
    for every parameter of a dtype group at once: one state-sized temporary. The fused kernel and
    bitsandbytes' 8-bit kernel update in place; the per-tensor loop needs one temporary of the
    largest tensor; foreach SGD updates in place.
    """
    shard = zero_divisor(plan, ZeroStage.OPTIMIZER)
    match training.optimizer:
        case Optimizer.ADAMW:
            return params.trainable * training.precision.param_bytes // shard
        case _:
            return 0


def autocast_weight_copy_bytes(params: StageParams, training: TrainingConfig, plan: ParallelPlan) -> int:
    """Under autocast (*-mixed) every weight (and bias) a matmul uses gets a 16-bit copy that the
    autograd graph keeps for the backward matmul: 2 B per projection and LM-head parameter, alive
    from its forward use to its backward. Embedding lookups and norms are not cast. A LoRA/QLoRA
    base is stored 16-bit (or NF4) already, so only the fp32 adapters are cast; ZeRO-3's unsharded
    buffers are 16-bit too."""
    if not training.precision.is_mixed or plan.zero >= ZeroStage.PARAMETERS or plan.fsdp_param_dtype:
        return 0
    if training.method is not Method.FULL:
        return 2 * params.trainable  # the frozen base is stored 16-bit already; only adapters are cast
    return 2 * params.matmul


def autocast_head_copy_bytes(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan, last: bool) -> int:
    """The LM head's share of `autocast_weight_copy_bytes`: the last stage of full fine-tuning under
    autocast casts the head weight (the tied embedding's, when tied) to 16 bits for its matmul."""
    if not last or training.method is not Method.FULL:
        return 0
    if not training.precision.is_mixed or plan.zero >= ZeroStage.PARAMETERS or plan.fsdp_param_dtype:
        return 0
    return 2 * head_matmul_params(arch, plan.tp)


def fsdp_unsharded_bytes(arch: ModelArch, params: StageParams, training: TrainingConfig, plan: ParallelPlan) -> int:
    """ZeRO-3 / FSDP full-shard all-gathers one layer at a time and prefetches the next: two layers'
    unsharded parameters in the compute dtype (FSDP2 MixedPrecisionPolicy(param_dtype=bf16))."""
    if plan.zero < ZeroStage.PARAMETERS or params.layers == 0 or plan.fsdp_param_dtype:
        return 0  # the fsdp2-param mode: frenzy.memory.fsdp_mixed
    per_layer = (params.total - arch.embedding_params() // plan.tp) // max(params.layers, 1)
    return 2 * per_layer * training.precision.compute_bytes


def ddp_bucket_bytes(params: StageParams, training: TrainingConfig, plan: ParallelPlan) -> int:
    """DDP (dp > 1, no ZeRO) keeps its own flat gradient buckets beside `param.grad` unless
    `gradient_as_bucket_view=True`; Frenzy's worker sets it, so buckets cost nothing extra. ZeRO-1/2
    reduce-scatter through one bucket (DeepSpeed default reduce_bucket_size 5e8 elements), capped by
    the gradients themselves."""
    if plan.dp == 1 or plan.zero in (ZeroStage.NONE, ZeroStage.PARAMETERS) or plan.fsdp_param_dtype:
        return 0
    return min(params.trainable, 500_000_000) * training.precision.param_bytes

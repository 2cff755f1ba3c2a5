"""The tensors one decoder layer saves for backward, per token: the layer inventory.

The inventory follows what PyTorch autograd keeps for Hugging Face decoder layers (the tensors an
op saves to compute its gradients), not a fitted constant. Korthikanti et al. 2022 ("Reducing
Activation Recomputation in Large Transformer Models", Table 2) give the closed form for a
Megatron GPT layer, sbh(34 + 5as/h) bytes in 16-bit with dropout; the inventory reproduces it
for such a layer (tests/unit/memory/test_formulas.py). HF layers differ from Megatron's in ways that matter:
  * RMSNorm upcasts its input to fp32 and keeps it (4 B/elt) besides the normalised output;
  * under autocast (*-mixed) the residual stream is fp32 (embeddings are fp32 parameters, and
    fp32 + bf16 promotes), so norm inputs are 4 B/elt and every matmul re-casts its input to bf16
    (one copy per projection that saves its input);
  * SwiGLU keeps gate, act(gate), up and their product (4 x intermediate);
  * GPT-2's `gelu_new` is composed from Python ops that each save an input;
  * flash / SDPA attention keeps q, k, v, the output and a per-head logsumexp, never s x s;
    eager attention keeps fp32 probabilities and their 16-bit copy, b x heads x s x s;
  * frozen projections (LoRA) do not save their input: grad_input needs only the weight; each
    adapter keeps its own 16-bit copy of its input under autocast (peft's fp32 upcast, autocast's
    downcast) and B keeps A's r-wide output; bitsandbytes' 4-bit projections (QLoRA) return
    their input's dtype, fp32 behind an autocast LayerNorm;
  * MoE blocks keep, per chosen expert, its gathered input, body and output, and the router its
    indices and routing weights (`router_saved`: softmax-then-top-k or PhiMoE's sparsemixer);
  * q/k norms (Qwen3 per head, OLMoE over the whole projection) keep what the layer norms keep.
Everything here is bytes per token of one micro-batch on one tensor-parallel rank.
"""

from __future__ import annotations

from enum import Enum

from frenzy.core.model import Linear, ModelArch, Norm, Router
from frenzy.core.plan import ParallelPlan
from frenzy.core.tensor_parallel import splits_by_expert
from frenzy.core.training import Attention, Method, Precision, Recompute, TrainingConfig

# MLP activations that transformers composes from Python ops (transformers.activations), each of
# which keeps its own inputs for backward.
_COMPOSED_GELU = {"gelu_new", "gelu_fast"}


def residual_bytes(precision: Precision) -> int:
    """Residual-stream element size: fp32 under autocast and in fp32, bf16 when training pure bf16."""
    return 2 if precision is Precision.BF16 else 4


def _lora_residual_is_16bit(arch: ModelArch, training: TrainingConfig) -> bool:
    """Whether a frozen 16-bit base (LoRA under autocast) keeps the residual stream 16-bit, so that
    each norm's fp32 upcast is its own copy (see `checkpointed_input_bytes`)."""
    frozen_under_autocast = training.method is not Method.FULL and training.precision.is_mixed
    return frozen_under_autocast and checkpointed_input_bytes(arch, training) == 2


def _frozen_outputs_fp32(arch: ModelArch, training: TrainingConfig) -> bool:
    """QLoRA under autocast behind a LayerNorm: bitsandbytes' Linear4bit computes in 16 bits but
    returns its output in its input's dtype, and autocast's layer_norm outputs fp32, so q, k, v and
    the up projection's output are fp32, and so are the MLP activation and what it keeps. (HF
    RMSNorms return the residual's dtype, 16-bit here, so RMSNorm models stay 16-bit.)"""
    return training.method is Method.QLORA and training.precision.is_mixed and arch.norm is Norm.LAYER


def _adapter_keeps_own_copy(training: TrainingConfig) -> bool:
    """Whether a LoRA adapter keeps its own copy of its input rather than the tensor it reads: under
    autocast peft casts the input up to the fp32 adapter dtype and autocast casts that back to 16
    bits for the A matmul, which saves it; with LoRA dropout A saves the dropped copy (and its mask)."""
    return training.method is not Method.FULL and (training.precision.is_mixed or training.lora_dropout > 0)


def _trains(training: TrainingConfig, names: set[str]) -> bool:
    """Whether any projection answering to `names` updates a weight (full) or carries an adapter."""
    return training.method is Method.FULL or bool(training.trainable_targets & names)


def _input_saves(arch: ModelArch, training: TrainingConfig, names: set[str], width: int) -> int:
    """Bytes per token that projections reading one tensor of `width` keep of it.

    Full fine-tuning: pure precisions share the one tensor; under autocast each matmul casts its
    fp32 input to bf16 afresh and each copy is saved. LoRA: the frozen base saves nothing, each
    adapter's A matrix saves its input — the shared tensor, its own autocast copy, or, with LoRA
    dropout, its own dropped copy plus the bool mask.
    """
    readers = [lin for lin in arch.linears if lin.targets & names and not lin.per_expert]
    return reader_saves(training, readers, width)


def reader_saves(training: TrainingConfig, readers: list[Linear], width: int) -> int:
    """What `readers` (projections reading one tensor of `width`) keep of it, as `_input_saves` says."""
    trainable = [lin for lin in readers if _trains(training, set(lin.targets))]
    if not trainable:
        return 0
    p = training.precision
    copy_bytes = 2 if p.is_mixed else p.compute_bytes
    if training.method is not Method.FULL and training.lora_dropout > 0:
        return (1 + copy_bytes) * width * len(trainable)
    if not p.is_mixed:
        return copy_bytes * width
    return 2 * width * len(trainable)


def _o_input_saves(arch: ModelArch, training: TrainingConfig, q_dim: int, transposed: bool) -> int:
    """Bytes per token that o_proj keeps of the attention output. A trained o reads the output itself,
    or the contiguous copy made when the kernel's output is laid out (b, heads, s, d) (`transposed`);
    a LoRA adapter may keep a copy of its own instead (_adapter_keeps_own_copy)."""
    if not _trains(training, {"o"}):
        return 0
    if _adapter_keeps_own_copy(training):
        return _input_saves(arch, training, {"o"}, q_dim)
    return training.precision.compute_bytes * q_dim if transposed else 0


def lora_rank_saved(arch: ModelArch, training: TrainingConfig) -> int:
    """Bytes per token of each adapter's A output (r wide, in the compute dtype), which B keeps as
    its input for B's weight gradient; one per adapted projection (a fused qkv carries one)."""
    if training.method is Method.FULL:
        return 0
    adapters = [lin for lin in arch.linears if lin.targets & training.trainable_targets and not lin.per_expert]
    return training.precision.compute_bytes * training.lora_rank * len(adapters)


def norm_saved(arch: ModelArch, training: TrainingConfig, sublayer_output: bool = False) -> int:
    """One norm, bytes per token. RMSNorm (HF): the fp32 input (4h) and, when its weight trains, the
    normalised tensor it multiplies (fp32 under autocast, else the compute dtype; a norm of a
    sublayer's output (GLM-4's post-norms) reads a 16-bit tensor, so its normalised tensor is 16-bit
    under autocast too). LayerNorm (`native_layer_norm`): its input plus per-token mean and rstd."""
    h, p = arch.hidden_size, training.precision
    if arch.norm is Norm.LAYER:
        return residual_bytes(p) * h + 8
    if arch.norm is Norm.LAYER_FP32:
        return _composed_layer_norm_saved(training) * h + 4
    if training.method is not Method.FULL:
        return 4 * h + 4
    normalised = p.compute_bytes if sublayer_output else residual_bytes(p)
    if arch.norm_fp32_output:  # Gemma and OLMo 2 scale in fp32 before casting back
        normalised = 4
    return 4 * h + normalised * h + 4


def qk_norm_saved(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan, which: set[str]) -> int:
    """Norms on the q and/or k projection output (`which`), bytes per token: per head (Qwen3, Gemma 3)
    or over the whole projection (OLMo 2, OLMoE: `qk_norm_full_width`). An RMSNorm keeps its fp32
    input, an fp32 rstd per normalised row and, when its weight trains, the normalised tensor the
    weight multiplies: in the compute dtype (Qwen3), or fp32 where the norm scales before casting
    back (Gemma, OLMo 2). A frozen weight (LoRA) needs no normalised copy. Cohere's per-head
    LayerNorm is composed of Python ops and keeps what they keep."""
    widths = {"q": arch.num_heads // plan.tp, "k": max(arch.num_kv_heads // plan.tp, 1)}
    normalised = 0
    if training.method is Method.FULL and not arch.qk_l2_norm:  # Llama 4's L2 norm has no weight
        normalised = 4 if arch.norm_fp32_output else training.precision.compute_bytes
    total = 0
    for name in which:
        heads = widths[name]
        if arch.norm is Norm.LAYER_FP32:
            total += _composed_layer_norm_saved(training) * heads * arch.head_dim
            continue
        rows = 1 if arch.qk_norm_full_width else heads
        total += (4 + normalised) * heads * arch.head_dim + 4 * rows
    return total


def _eager_scores_saved(arch: ModelArch, precision: Precision) -> int:
    """Bytes per attention score that eager attention keeps: the softmax output (fp32 when the model
    or autocast upcasts it) and the compute-dtype tensor that multiplies v. Without dropout that is
    the softmax output itself or its cast; with attention dropout it is the dropped copy, beside a
    bool mask (Korthikanti et al.: 2 + 1 + 2), and a cast before the dropout is freed: dropout's
    backward needs only the mask (GPT-2 under autocast: fp32 softmax, mask, bf16 dropped copy)."""
    c = precision.compute_bytes
    softmax = 4 if arch.eager_softmax_fp32 or arch.eager_qk_fp32 or precision.is_mixed else c
    if arch.attention_dropout > 0:
        kept = softmax + 1 + c
    else:
        kept = softmax + (c if softmax != c else 0)
    if arch.attn_softcap:
        kept += c  # tanh keeps its output
    return kept


def _composed_layer_norm_saved(training: TrainingConfig) -> int:
    """Bytes per normalised element of Cohere's LayerNorm, composed of Python ops in fp32: it
    subtracts the mean twice (once for the variance, whose pow keeps it; once to normalise, where
    the product with rstd keeps it) and, when its weight trains, keeps the normalised product the
    weight multiplies; the fp32 input itself is not needed (subtraction keeps nothing)."""
    return 8 + (4 if training.method is Method.FULL else 0)


class Kernel(Enum):
    """The attention kernel that runs, which decides what attention keeps for backward."""

    FLASH = "flash"  # flash-attention: q, k, v, output, fp32 logsumexp
    EFFICIENT = "efficient"  # memory-efficient (cutlass) kernel: the same tensors
    MATH = "math"  # SDPA's composite fallback: scaled q, expanded k and v, probabilities
    EAGER = "eager"  # the model's own matmul + softmax code


def attention_kernel(arch: ModelArch, training: TrainingConfig) -> Kernel:
    """PyTorch's SDPA picks flash for 16-bit inputs with head_dim <= 256 (multiple of 8), else the
    memory-efficient kernel, which (in PyTorch 2.13) does not take grouped KV heads; HF passes
    `enable_gqa` when there is no mask, so fp32 GQA models fall to the math kernel."""
    if training.attention is Attention.EAGER or not arch.sdpa_supported:
        return Kernel.EAGER
    low = training.precision.compute_bytes == 2
    if low and arch.head_dim <= 256 and arch.head_dim % 8 == 0:
        return Kernel.FLASH
    grouped = arch.num_kv_heads != arch.num_heads and arch.head_dim <= 256
    if not grouped and arch.head_dim % (8 if low else 4) == 0:
        return Kernel.EFFICIENT
    return Kernel.MATH


def attention_saved(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan, seq: int,
                    windowed: bool = True, rope: bool = True) -> dict[str, int]:
    """Attention block of one layer, bytes per token on one tensor-parallel rank (`windowed`: the
    layer uses the model's sliding window or attention chunks; the global layers of an interleaved
    pattern do not; `rope`: not one of Llama 4's NoPE layers, which skip the q/k norm)."""
    c = training.precision.compute_bytes
    heads = arch.num_heads // plan.tp
    q_dim = heads * arch.head_dim
    kv_dim = max(arch.num_kv_heads // plan.tp, 1) * arch.head_dim
    fused = any(lin.name == "qkv" for lin in arch.linears)
    kernel = attention_kernel(arch, training)
    items = {"qkv_input": _input_saves(arch, training, {"q", "k", "v"}, arch.hidden_size)}
    if arch.qk_norm and (rope or not arch.qk_l2_norm):
        items["qk_norm"] = qk_norm_saved(arch, training, plan, {"q", "k"})
    # The kernel keeps q, k, v (rotated copies for RoPE; a fused qkv output stays alive through the v view)
    items["qkv"] = c * (q_dim + 2 * kv_dim)
    if fused and arch.rotary_dim and not _frozen_outputs_fp32(arch, training):
        # (an fp32 qkv out of a 4-bit base reaches the kernel through autocast's 16-bit casts,
        # which are all the kernel keeps: the fp32 output and its rotated copies are let go)
        items["qkv"] += c * (q_dim + kv_dim)
    if kernel in (Kernel.EAGER, Kernel.MATH):
        items["qkv"] += 2 * c * (q_dim - kv_dim)  # k and v expanded to every query head
        if kernel is Kernel.EAGER and arch.eager_qk_fp32 and not training.precision.is_mixed:
            # fp32 copies of q and k, and v (GPT-J, GPT-Neo: no GQA). Under autocast the q @ k^T
            # matmul casts the fp32 copies back to 16 bits and keeps those: 16-bit q, k and v.
            items["qkv"] = 8 * q_dim + c * q_dim
        if kernel is Kernel.EAGER and plan.recompute is Recompute.NONE:
            items["scores"] = _eager_scores_saved(arch, training.precision) * heads * seq
            if arch.attention_sinks:
                from frenzy.memory.recent_moe_inventory import sink_scores_saved

                items["scores"] = sink_scores_saved(training) * heads * (seq + 1) + 8 * heads
        elif kernel is Kernel.MATH:
            items["scores"] = c * heads * seq  # softmax output in the input dtype
        # their output is (b, heads, s, d)-contiguous: o_proj gets a transposed copy
        items["o_input"] = _o_input_saves(arch, training, q_dim, transposed=True)
    else:
        # Fused kernels keep their output and an fp32 logsumexp per head. The output takes the
        # query's memory layout: RoPE applied in place of layout keeps (b, s, heads, d), so o_proj
        # reads it without a copy; partial rotary builds q with `cat`, contiguous as (b, heads, s, d),
        # and o_proj then gets a transposed copy.
        items["attn_out"] = c * q_dim + 4 * heads
        rope_by_cat = arch.rope_concat or 0 < arch.rotary_dim < arch.head_dim
        if o_input := _o_input_saves(arch, training, q_dim, transposed=rope_by_cat):
            items["o_input"] = o_input
        window = arch.sliding_window or arch.attention_chunk  # chunks get their mask as windows do
        if windowed and window and seq >= window:
            # A sequence as long as the window or longer gets an explicit mask (transformers'
            # masking_utils skips it only while kv_length < sliding_window): SDPA then takes the
            # memory-efficient kernel, which keeps a per-layer copy of the mask, and HF expands
            # grouped k and v itself (no `enable_gqa` with a mask) -- a view, not a copy, when a
            # single KV head is expanded (Gemma 3 1B's multi-query attention), unless the kernel's
            # 16-bit cast copies it: k rotated in fp32 (cos and sin follow an fp32 residual stream).
            items["window_mask"] = c * seq
            if kv_dim > arch.head_dim:
                items["qkv"] += 2 * c * (q_dim - kv_dim)
            elif training.precision.is_mixed and checkpointed_input_bytes(arch, training) == 4 and arch.rotary_dim:
                items["qkv"] += c * (q_dim - kv_dim)
    if arch.hidden_dropout > 0:
        items["attn_dropout_mask"] = arch.hidden_size
    return items


def _activation_saved_bytes(arch: ModelArch, precision: Precision, c: int) -> int:
    """Bytes per intermediate element the MLP activation keeps, for an input of `c` bytes. Fused ops
    keep their input; relu keeps its output. `gelu_new` is composed of Python ops: pow keeps its
    input, tanh its output, and the final product keeps 0.5x and 1 + tanh; under autocast pow runs
    in fp32, so its input copy, tanh and 1 + tanh are fp32."""
    if arch.activation in _COMPOSED_GELU:
        wide = 4 if precision.is_mixed else c
        return 3 * wide + c
    return c


def mlp_saved(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan, dense: bool = False) -> dict[str, int]:
    """The MLP block, bytes per token (`dense`: one of Llama 4's dense layers, `dense_intermediate_size`
    wide, in a model whose common layer is MoE)."""
    c = training.precision.compute_bytes
    inter = (arch.dense_intermediate_size if dense else arch.intermediate_size) // plan.tp
    items = {"mlp_input": _input_saves(arch, training, {"gate", "up"}, arch.hidden_size)}
    down_input = c * inter if _trains(training, {"down"}) else 0
    # the up projection's output, in which the activation runs (fp32 out of a 4-bit base behind a LayerNorm)
    up_out = 4 if _frozen_outputs_fp32(arch, training) else c
    if arch.mlp_gated:
        # act(gate) keeps gate; the product keeps act(gate) and up; down keeps the product
        body = _activation_saved_bytes(arch, training.precision, up_out) * inter + 2 * up_out * inter + down_input
    elif arch.activation == "relu":
        body = up_out * inter  # relu keeps its output, which is also fc2's input
        if _adapter_keeps_own_copy(training):  # unless fc2's adapter keeps a copy of its own
            body += _input_saves(arch, training, {"down"}, inter)
    else:
        body = _activation_saved_bytes(arch, training.precision, up_out) * inter + down_input
    items["mlp_body"] = body
    if arch.is_moe and not dense:  # the sparse block's input, router and body in place of the dense MLP's
        from frenzy.memory.recent_moe_inventory import llama4_moe_saved

        items.update(llama4_moe_saved(arch, training, plan) if arch.router is Router.TOPK_SIGMOID
                     else _moe_saved(arch, training, plan))
    if arch.hidden_dropout > 0:
        items["mlp_dropout_mask"] = arch.hidden_size
    return items


def _moe_saved(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan) -> dict[str, int]:
    """The sparse MoE block (transformers' grouped-mm experts), bytes per token.

    transformers 5 stores the routed experts as fused 3-D parameters, not nn.Linear modules: LoRA
    adapters never reach them and QLoRA leaves them 16-bit, so they train under full fine-tuning
    only. The grouped matmul runs in the experts' storage dtype (autocast does not cast it): fp32
    masters under full *-mixed fine-tuning, the 16-bit frozen base under LoRA. Frozen experts keep
    neither their gathered input nor the product `down` reads (no weight gradient needs them).
    """
    c, h, k = training.precision.compute_bytes, arch.hidden_size, arch.experts_per_token
    experts_train = training.method is Method.FULL
    e = training.precision.param_bytes if experts_train else c
    inter = routed_expert_width(arch, plan)
    cast = 2 if training.precision.is_mixed else 0  # autocast copies of the norm output, else shared
    # Per choice: act(gate) keeps gate, the product keeps act(gate) and up, down keeps the product
    # when it trains, and the routing-weight product keeps the expert's output.
    expert = _activation_saved_bytes(arch, training.precision, c) * inter + 2 * c * inter
    if arch.activation == "swiglu_clamped":
        # gpt-oss: both clamps keep the gate_up output (2 x inter); sigmoid keeps its output, the
        # gate product the clamped gate, and (up + 1) * glu both of its factors
        expert = 6 * c * inter
    expert += c * inter if experts_train else 0
    items = {
        # each choice's gathered copy of the norm output, kept by grouped_mm for the weight gradient;
        # with frozen experts only the shared expert's adapters keep the norm output
        "mlp_input": k * e * h if experts_train else _input_saves(arch, training, {"gate", "up"}, h),
        # routing (router_saved) and, when the router trains, its input: an autocast copy of the
        # norm output, or in pure precision the norm output itself, which every reader shares
        # (counted here once; a LayerNorm keeps its input, not its output)
        "router": router_saved(arch, training) + ((cast or c) * h if experts_train else 0),
        "mlp_body": k * (expert * e // c + e * h),
    }
    fp32_router_copy = arch.router_fp32 and experts_train and not cast
    if fp32_router_copy:
        # DeepSeek's router upcasts its input: in pure precision it keeps an fp32 copy of its own
        items["router"] += (4 - c) * h
    if experts_train and any(lin.per_expert and lin.bias for lin in arch.linears):
        items["router"] += 8 * k  # the per-choice bias gathers keep the sorted expert ids
    items["router"] += sentinel_masks_saved(arch, plan)
    if arch.shared_expert_size:
        # the shared expert (a gated MLP of nn.Linear modules, adapters allowed) and its sigmoid
        # gate (Qwen2-MoE), whose product keeps the shared output; trained, gate, up and the sigmoid
        # gate read autocast copies (in pure precision the norm output beside DeepSeek's fp32 router copy)
        shared = arch.shared_expert_size // plan.tp
        gate = arch.shared_expert_gate
        items["mlp_body"] += (_activation_saved_bytes(arch, training.precision, c) + 2 * c) * shared + c * h * gate
        items["mlp_body"] += c * shared if _trains(training, {"down"}) else 0
        items["mlp_body"] += (2 + gate) * cast * h if experts_train else 0
        items["mlp_body"] += c * h if fp32_router_copy else 0
    return items


def routed_expert_width(arch: ModelArch, plan: ParallelPlan) -> int:
    """The width at which one tensor-parallel rank runs a routed expert, per choice of every token.
    Split by width, intermediate_size / tp. Split by expert (frenzy.core.tensor_parallel: the
    worker's split of the families in its rule table), the rank holds num_experts / tp whole experts
    and sees every token; transformers' grouped-mm experts gather, multiply and activate all
    tokens x top-k rows at the whole width (another rank's choices are sentinel rows the kernel
    skips, not rows left out), so the rank keeps what one unsplit rank keeps."""
    return arch.intermediate_size if splits_by_expert(arch.family) else arch.intermediate_size // plan.tp


def sentinel_masks_saved(arch: ModelArch, plan: ParallelPlan) -> int:
    """Bytes per token of the split by expert's masks (tp > 1): the bool mask that zeroes the routing
    weight of another rank's choice (frenzy.train.tensor_parallel.local_routing), and grouped-mm's
    bool mask of the sorted sentinel rows, which its masked fills keep, one byte per choice each."""
    return 2 * arch.experts_per_token if plan.tp > 1 and splits_by_expert(arch.family) else 0


def router_saved(arch: ModelArch, training: TrainingConfig) -> int:
    """Routing, bytes per token. Every router leaves four int64 indices per choice for backward (its
    top-k or sampled index, and grouped-mm's sort permutation, gather index and inverse permutation)
    and the routing weight per choice that scales each expert's output.

    Softmax-then-top-k: the fp32 softmax over the E experts; renormalising the top-k in place
    (`norm_topk_prob`) keeps a clone of the k values and their sum; the weights stay fp32 (Mixtral)
    or are cast to the logits' dtype (Qwen-MoE, OLMoE).
    PhiMoE's sparsemixer picks two experts, each from a masked softmax: per pick the bool mask, the
    softmax output (fp32 under autocast, which runs softmax in fp32) and the picked probability its
    custom backward keeps. In training it also scales the normalised input by uniform noise twice,
    in place, and each multiplication keeps its noise (the LayerNorm output's dtype: fp32 under autocast).
    """
    c, experts, k = training.precision.compute_bytes, arch.num_experts, arch.experts_per_token
    index = 32 * k
    if arch.router is Router.SPARSEMIXER:
        s = 4 if training.precision.is_mixed else c
        jitter = 2 * s * arch.hidden_size if arch.router_input_jitter else 0
        return index + k * (experts + s * experts + 2 * s) + jitter
    if arch.router is Router.SIGMOID:
        # DeepSeek-V3: sigmoid of the fp32 router logits (16-bit under autocast, whose linear casts
        # them down); the group-limited choice on bias-corrected scores keeps only indices, and the
        # weights gathered from the sigmoid (renormalised in place: a clone and the sum) follow its dtype
        s = 2 if training.precision.is_mixed else 4
        return s * experts + index + s * k + (s * k + s if arch.router_norm_topk else 0)
    if arch.router is Router.TOPK_SOFTMAX:
        # the softmax over the k logits keeps its output, in the logits' dtype (F.softmax is given
        # it), and the grouped experts keep its sorted copy
        return index + 2 * c * k
    weights = 4 if arch.router_weights_fp32 else c
    norm = 4 * k + 4 if arch.router_norm_topk else 0
    mask = experts if arch.router_group_mask else 0  # group-limited greedy: the bool mask on the scores
    return 4 * experts + index + weights * k + norm + mask


def _norms_share_input(arch: ModelArch, training: TrainingConfig) -> bool:
    """Parallel-residual LayerNorms (GPT-NeoX) read the same input and keep it once, unless autocast
    upcasts a 16-bit residual (LoRA): each layer_norm then keeps its own fp32 copy."""
    return arch.norm is Norm.LAYER and arch.parallel_residual and not _lora_residual_is_16bit(arch, training)


def norms_saved(arch: ModelArch, training: TrainingConfig) -> int:
    """A layer's norms; norms that share their input keep it once (plus their own mean and rstd)."""
    if _norms_share_input(arch, training):
        return norm_saved(arch, training) + 8 * (arch.norms_per_layer - 1)
    post = arch.post_sublayer_norms
    return (arch.norms_per_layer - post) * norm_saved(arch, training) + post * norm_saved(arch, training, True)


def layer_inventory(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan, seq: int,
                    windowed: bool = True, rope: bool = True, dense: bool = False) -> dict[str, int]:
    """Named saved tensors of one decoder layer, bytes per token (no recomputation); Llama 4's layer
    kinds: `rope` (else NoPE: global, no q/k norm) and `dense` (else MoE)."""
    items = {"norms": norms_saved(arch, training)}
    if arch.mla_kv_rank:  # DeepSeek's multi-head latent attention
        from frenzy.memory.layer_mla import mla_attention_saved
        items.update(mla_attention_saved(arch, training, plan, seq))
    else:
        items.update(attention_saved(arch, training, plan, seq, windowed and rope, rope))
    items.update(mlp_saved(arch, training, plan, dense))
    items["lora_rank"] = lora_rank_saved(arch, training)
    shared_norm = arch.parallel_residual and arch.norms_per_layer == 1
    one_tensor = not training.precision.is_mixed and (training.method is Method.FULL or not training.lora_dropout)
    if shared_norm and one_tensor and items["qkv_input"]:
        items["mlp_input"] = 0  # attention and MLP read one normalised tensor, kept once
    if plan.sequence_parallel:
        # Sequence parallelism shards the norm/dropout region along the sequence. The projections
        # keep the all-gathered input: torch's DTensor saves the gathered tensor for the backward
        # matmul (Megatron-LM re-gathers it in backward instead), so qkv_input and mlp_input stay
        # whole (traced: frenzy.memory.trace.sequence_parallel).
        for key in ("norms", "attn_dropout_mask", "mlp_dropout_mask"):
            if key in items:
                items[key] //= plan.tp
    return items


def checkpointed_input_bytes(arch: ModelArch, training: TrainingConfig) -> int:
    """Element size of a decoder layer's input, the residual stream between layers. Full fine-tuning
    follows `residual_bytes` (fp32 master embeddings make it fp32 under autocast). LoRA/QLoRA store
    the frozen embedding in 16 bits, and under autocast what adds into the stream comes out of a
    16-bit matmul, so the stream stays 16-bit -- unless the fp32 output of a LayerNorm (autocast
    runs it in fp32) reaches it: BLOOM's embedding norm and post-LN layers (LayerNorm models without
    a final norm, OPT-350m) write the stream itself, and QLoRA's 4-bit layers return their input's
    dtype (bitsandbytes `Linear4bit`), so an MLP fed by a LayerNorm adds an fp32 output, and so does
    an MoE block (transformers casts the experts' sum back to its input's dtype: PhiMoE).
    The first layer's input is the embedding itself, 16-bit (see `first_layer_unsaved_bytes_per_token`)."""
    if training.method is Method.FULL or not training.precision.is_mixed:
        return residual_bytes(training.precision)
    if arch.norm is not Norm.LAYER:
        return 2
    layer_norm_writes_stream = arch.embedding_norm or not arch.final_norm
    return 4 if layer_norm_writes_stream or training.method is Method.QLORA or arch.is_moe else 2

"""Model architectures normalised from Hugging Face configs into what memory and FLOPs depend on."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import Enum

from frenzy.core.hashing import fields_hash, reduce_by_fields


class Norm(Enum):
    RMS = "rmsnorm"
    LAYER = "layernorm"
    LAYER_FP32 = "layernorm_fp32"  # LayerNorm composed of Python ops in fp32, returning the input dtype (Cohere)


class Positions(Enum):
    ROPE = "rope"
    LEARNED = "learned"
    ALIBI = "alibi"


class Router(Enum):
    """How an MoE layer picks its experts, which decides what routing keeps for backward."""

    SOFTMAX_TOPK = "softmax_topk"  # softmax over the experts, then top-k (Mixtral, Qwen-MoE, OLMoE)
    SPARSEMIXER = "sparsemixer"  # PhiMoE: two masked softmaxes, each sampled in training
    SIGMOID = "sigmoid"  # DeepSeek-V3: sigmoid scores, group-limited top-k on bias-corrected scores
    TOPK_SOFTMAX = "topk_softmax"  # top-k of the logits, then a softmax over the k (gpt-oss)
    TOPK_SIGMOID = "topk_sigmoid"  # top-k of the logits, a sigmoid of each, scaling the expert's input (Llama 4)


class TpSplit(Enum):
    COLUMN = "column"  # output features sharded (q, k, v, gate, up)
    ROW = "row"  # input features sharded (o, down); bias replicated


@dataclass(frozen=True, slots=True, kw_only=True)
class Linear:
    """One projection of a decoder layer. `targets` are the LoRA names it answers to
    (a fused qkv projection answers to q, k and v)."""

    name: str
    in_features: int
    out_features: int
    bias: bool
    split: TpSplit
    targets: frozenset[str]
    per_expert: bool = False  # an MoE expert projection: one copy per expert

    def __post_init__(self):
        for n in (self.in_features, self.out_features):
            if isinstance(n, bool) or not isinstance(n, int):
                raise ValueError(f"linear {self.name}: features must be integers, got {n!r}; check the config's sizes")
        if self.in_features < 1 or self.out_features < 1:
            raise ValueError(f"linear {self.name}: features must be positive")

    @property
    def weight_params(self) -> int:
        return self.in_features * self.out_features

    @property
    def params(self) -> int:
        return self.weight_params + (self.out_features if self.bias else 0)

    def sharded_params(self, tp: int) -> int:
        """Parameters of this projection on one tensor-parallel rank."""
        bias = 0
        if self.bias:
            bias = self.out_features // tp if self.split is TpSplit.COLUMN else self.out_features
        return self.weight_params // tp + bias


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelArch:
    """A decoder-only transformer, as far as memory and FLOPs are concerned."""

    name: str
    family: str  # HF model_type
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int  # width of one MLP projection (per expert for MoE)
    max_position_embeddings: int
    linears: tuple[Linear, ...]  # one decoder layer's projections
    norm: Norm = Norm.RMS
    norm_bias: bool = False
    norms_per_layer: int = 2
    qk_norm: bool = False  # norm on q and k: per head (Qwen3), or over the whole projection (below)
    qk_norm_full_width: bool = False  # q/k norm weights span every head (OLMo 2, OLMoE, Cohere), not one head_dim
    post_sublayer_norms: int = 0  # of norms_per_layer, those normalising a sublayer's output (OLMo 2, GLM-4)
    mlp_gated: bool = True  # SwiGLU/GeGLU (3 matrices) vs plain GELU MLP (2)
    activation: str = "silu"
    parallel_residual: bool = False  # attention and MLP read the same input (GPT-J, NeoX, Phi, Falcon)
    positions: Positions = Positions.ROPE
    learned_position_rows: int = 0
    rotary_dim: int = 0  # rotated dims per head (partial rotary for NeoX/Phi/StableLM)
    tie_word_embeddings: bool = False
    lm_head_bias: bool = False
    embedding_norm: bool = False  # BLOOM's word_embeddings_layernorm
    final_norm: bool = True
    embed_proj_dim: int = 0  # OPT-350m projects 512-wide embeddings to the hidden size
    num_experts: int = 0  # 0 = dense
    experts_per_token: int = 0
    shared_expert_size: int = 0  # Qwen2-MoE shared expert width (with a sigmoid gate)
    shared_expert_gate: bool = True  # the shared expert's output is scaled by a sigmoid gate (Qwen2-MoE; not DeepSeek)
    router: Router = Router.SOFTMAX_TOPK
    # Llama 4 interleaves MoE layers (the common layer) with dense ones whose gated MLP is this wide;
    # their parameters are stated through irregular_* below, their activations through these fields.
    dense_layers: int = 0
    dense_intermediate_size: int = 0
    nope_layers: int = 0  # layers without RoPE (Llama 4: no q/k norm there, a temperature-scaled q instead)
    attention_chunk: int = 0  # Llama 4's RoPE layers attend within chunks of this many tokens
    qk_l2_norm: bool = False  # the q/k norm is a weightless L2 norm on the RoPE layers only (Llama 4)
    router_norm_topk: bool = True  # top-k weights renormalised to sum to 1 (Mixtral; `norm_topk_prob`)
    router_weights_fp32: bool = True  # routing weights stay fp32 (Mixtral); Qwen/OLMoE cast to the logits' dtype
    router_input_jitter: bool = False  # PhiMoE scales the router input by uniform noise, twice, in training
    router_fp32: bool = False  # the router upcasts its input and keeps an fp32 weight (DeepSeek)
    router_group_mask: bool = False  # group-limited greedy top-k masks the scores (DeepSeek-V2)
    attention_dropout: float = 0.0
    hidden_dropout: float = 0.0
    logit_softcap: float = 0.0
    eager_softmax_fp32: bool = True  # eager attention takes softmax in fp32 (GPT-2 and GPT-Neo do not)
    # How the family's HF attention code runs, where it departs from the common SDPA path:
    sdpa_supported: bool = True  # False: HF runs its own eager attention (GPT-J, GPT-Neo, BLOOM, soft-capped Gemma 2)
    eager_qk_fp32: bool = False  # eager attention upcasts q and k to fp32 (GPT-J, GPT-Neo)
    attn_softcap: bool = False  # tanh soft-capping of attention scores (Gemma 2)
    attention_sinks: bool = False  # a learned per-head logit joins each softmax row (gpt-oss, eager only)
    norm_fp32_output: bool = False  # RMSNorm keeps its normalised tensor in fp32 (Gemma)
    buffer_bytes_per_layer: int = 0  # non-parameter buffers, e.g. GPT-Neo's bool causal mask per layer
    rope_concat: bool = False  # q and k are rebuilt with `cat` after RoPE (partial rotary, Phi-3)
    sliding_window: int = 0  # attention window; longer sequences need an explicit mask
    global_layers: int = 0  # of num_layers, those attending globally despite sliding_window (Gemma 3, Cohere 2)
    embedding_scaled: bool = False  # the model scales the embedding module's output before the first layer (Granite)
    # The profiled path (frenzy.core.generic): a family without a formula is described by its module
    # tree, and its activations come from a traced profile stored under this key.
    profile_key: str = ""
    recompute: bool = True  # the worker can recompute its layers (transformers' activation checkpointing)
    layer_other_params: int | None = None  # per layer outside the projections; None: from the fields above
    # Layers that differ from the common one (DeepSeek's dense first layers, Llama 4's dense MLP
    # layers): their parameters beyond `num_layers` common layers, nn.Linear projections apart.
    irregular_linear_params: int = 0
    irregular_other_params: int = 0
    # Of all the parameters, those a text step never reads (Phi-4-multimodal's encoders, Mllama's
    # cross-attention layers): the worker freezes them, so they are stored but get no gradients or
    # optimizer state (frenzy.train.unused).
    unused_params: int = 0
    # Pretraining length where the config states one shorter than max_position_embeddings, which rope
    # scaling (Qwen v1's dynamic NTK) reaches beyond it; 0 = not stated. Only warnings read it.
    trained_seq_len: int = 0
    # DeepSeek: the first `dense_layers` of num_layers carry a dense gated MLP of
    # `dense_intermediate_size` in place of the MoE block (their parameters: irregular_* above).
    dense_layers: int = 0
    dense_intermediate_size: int = 0
    # Multi-head latent attention (DeepSeek): the kv (and q, 0 = direct q) latent ranks, each with an
    # RMSNorm; head_dim is the q/k head width (rotary_dim of it rotated), v_head_dim the value's.
    mla_kv_rank: int = 0
    mla_q_rank: int = 0
    v_head_dim: int = 0
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        return self._hash  # frenzy.core.hashing

    def __reduce__(self):
        return reduce_by_fields(self)  # the stored hash is this process's: frenzy.core.hashing

    def __post_init__(self):
        _check_field_types(self)
        object.__setattr__(self, "_hash", fields_hash(self))
        for field_name in ("vocab_size", "hidden_size", "num_layers", "num_heads", "num_kv_heads", "head_dim"):
            if getattr(self, field_name) < 1:
                raise ValueError(f"{self.name}: {field_name} must be positive")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"{self.name}: num_heads {self.num_heads} not a multiple of kv heads {self.num_kv_heads}")
        if self.num_experts and not 0 < self.experts_per_token <= self.num_experts:
            raise ValueError(f"{self.name}: experts_per_token must be in 1..num_experts")
        for field_name in ("attention_dropout", "hidden_dropout"):  # the formulas compare them with 0
            p = getattr(self, field_name)
            if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p < 1:
                raise ValueError(f"{self.name}: {field_name} must be a probability in [0, 1), got {p!r}")

    # ---- parameter counts --------------------------------------------------------------

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    def _copies(self, linear: Linear) -> int:
        return self.num_experts if linear.per_expert else 1

    @property
    def norm_params(self) -> int:
        return self.hidden_size * (2 if self.norm_bias else 1)

    @property
    def model_source(self) -> str:
        """Where memory figures come from: the family's formulas, or a traced per-layer profile."""
        return "profiled" if self.profile_key else "formula"

    def layer_extra_params(self) -> int:
        """Per-layer parameters outside the projections: norms, router, shared-expert gate."""
        if self.layer_other_params is not None:
            return self.layer_other_params
        extra = self.norms_per_layer * self.norm_params
        if self.qk_norm:
            heads = self.num_heads + self.num_kv_heads if self.qk_norm_full_width else 2
            extra += heads * self.head_dim
        if self.is_moe:
            extra += self.hidden_size * self.num_experts  # router
            if self.shared_expert_size and self.shared_expert_gate:
                extra += self.hidden_size  # sigmoid gate of the shared expert
        return extra

    def layer_params(self) -> int:
        return sum(lin.params * self._copies(lin) for lin in self.linears) + self.layer_extra_params()

    def embedding_params(self) -> int:
        width = self.embed_proj_dim or self.hidden_size
        params = self.vocab_size * width + self.learned_position_rows * self.hidden_size
        if self.embed_proj_dim:
            params += 2 * self.embed_proj_dim * self.hidden_size  # project_in and project_out
        if self.embedding_norm:
            params += self.norm_params
        return params

    def head_params(self) -> int:
        """Final norm and the LM head (zero extra weight when tied to the embedding)."""
        params = self.norm_params if self.final_norm else 0
        if not self.tie_word_embeddings:
            params += self.vocab_size * (self.embed_proj_dim or self.hidden_size)
        if self.lm_head_bias:
            params += self.vocab_size
        return params

    @property
    def num_params(self) -> int:
        return (self.embedding_params() + self.num_layers * self.layer_params() + self.head_params()
                + self.irregular_linear_params + self.irregular_other_params)

    @property
    def active_params_per_token(self) -> int:
        """Parameters a token passes through (MoE: only its top-k experts); for FLOPs."""
        if not self.is_moe:
            return self.num_params
        inactive = sum(
            lin.params * (self.num_experts - self.experts_per_token) for lin in self.linears if lin.per_expert
        )
        return self.num_params - (self.num_layers - self.dense_layers) * inactive  # dense layers have no experts

    def summary(self) -> str:
        kind = f"MoE {self.num_experts}x top-{self.experts_per_token}" if self.is_moe else "dense"
        kind += ", profiled" if self.profile_key else ""
        return (
            f"{self.name} ({self.family}, {self.num_params / 1e9:.2f}B params, {kind}, "
            f"{self.num_layers} layers, hidden {self.hidden_size}, {self.num_heads} heads / "
            f"{self.num_kv_heads} kv, vocab {self.vocab_size})"
        )


def _check_field_types(arch: ModelArch) -> None:
    """Every count is an int and every switch a bool (signs are the checks above: some corrections are
    negative). Parsers copy some config values as they are (`cfg.get`), and a string or list there
    would otherwise fail deep in a formula (a 500) or count as true."""
    for f in fields(arch):
        value = getattr(arch, f.name)
        if f.type in ("int", "int | None"):
            if value is None and f.type == "int | None":
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{arch.name}: {f.name} must be an integer, got {value!r}; check the "
                                 "config field it comes from")
        elif f.type == "bool" and not isinstance(value, bool):
            raise ValueError(f"{arch.name}: {f.name} must be true or false, got {value!r}; check the config field "
                             "it comes from")

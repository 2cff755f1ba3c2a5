"""Floating-point work of one training token, per formula.

Conventions follow Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training on GPU
Clusters Using Megatron-LM", eq. 3) and PaLM (Chowdhery et al. 2022, appendix B): a matmul with N
weights costs 2N FLOPs per token forward and 4N backward (input and weight gradients); attention's
score and value products cost 4 * layers * seq * attn_width per token forward. Causal masking is not
halved, as in those papers and in the MFU that torchtitan and llm-foundry report.
"""

from __future__ import annotations

from frenzy.core.model import ModelArch
from frenzy.core.training import Method, Recompute, TrainingConfig


def matmul_params(arch: ModelArch) -> int:
    """Weights that take part in matmuls per token: active parameters minus the embedding lookup.

    The input embedding is a gather, not a matmul; a tied embedding still does the LM-head matmul,
    so only an untied input table is subtracted. MoE counts only the routed experts (top-k).
    """
    lookup = 0 if arch.tie_word_embeddings else arch.vocab_size * (arch.embed_proj_dim or arch.hidden_size)
    return arch.active_params_per_token - lookup


def attention_forward_flops_per_token(arch: ModelArch, seq_len: int) -> float:
    """QK^T and softmax(.)V: 2 matmuls x 2 FLOPs x seq x (heads x head_dim) per layer per token
    (MLA: QK^T over the q/k head width, softmax(.)V over the narrower v_head_dim)."""
    return 2.0 * arch.num_layers * seq_len * arch.num_heads * (arch.head_dim + (arch.v_head_dim or arch.head_dim))


def model_flops_per_token(arch: ModelArch, seq_len: int) -> float:
    """Model FLOPs of one trained token (the MFU numerator): 6 x matmul params + 3 x attention forward.

    Independent of implementation (no recomputation, full backward), as defined by Korthikanti et al.
    2022 and used by torchtitan's and llm-foundry's MFU.
    """
    return 6.0 * matmul_params(arch) + 3.0 * attention_forward_flops_per_token(arch, seq_len)


def hardware_flops_per_token(arch: ModelArch, training: TrainingConfig, recompute: Recompute, seq_len: int) -> float:
    """FLOPs the GPU actually executes per token (the HFU numerator).

    forward 2N + A; backward 4N + 2A for full fine-tuning, but only 2N + 2A when the base weights are
    frozen (LoRA/QLoRA compute input gradients, not weight gradients; adapters are negligible);
    full recomputation repeats the forward (+2N + A); attention-core recomputation repeats attention's
    score and value products (+A) (Korthikanti et al. 2022, section 5); selective recomputation
    (PyTorch SAC, frenzy.train.recompute) keeps every projection's and fused attention kernel's
    output, so it repeats only eager attention's products (+A), besides elementwise work.
    """
    n = float(matmul_params(arch))
    a = attention_forward_flops_per_token(arch, seq_len)
    backward = (4.0 if training.method is Method.FULL else 2.0) * n + 2.0 * a
    selective = a if training.attention.materialises_scores else 0.0
    extra = {Recompute.NONE: 0.0, Recompute.ATTENTION: a, Recompute.SELECTIVE: selective,
             Recompute.FULL: 2.0 * n + a}[recompute]
    return 2.0 * n + a + backward + extra

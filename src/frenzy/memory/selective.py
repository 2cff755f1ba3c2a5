"""What a decoder layer keeps under selective recomputation: PyTorch's selective activation
checkpointing with the op policy of `frenzy.train.recompute` (the worker runs it, the tracer traces it).

The layer runs under a non-reentrant checkpoint, so autograd keeps none of its saved tensors; SAC's
cache keeps every output of the ops the policy saves: the projections (`mm`/`addmm`, LoRA's A and B
included) and the fused attention kernel (its output and fp32 logsumexp). The checkpoint keeps the
layer's input, as full recomputation does. Per token of one micro-batch on one tensor-parallel rank:

    kept = input + sum over projections (out_features / tp for column-split, out_features for
           row-split, r and out_features for an adapter's A and B) x c + attention kernel outputs

with c the matmul's output size (2 B under autocast and in bf16, 4 B in fp32). Eager and math
attention keep nothing of attention itself: their batched matmuls are recomputed.
"""

from __future__ import annotations

from frenzy.core.model import Linear, ModelArch, TpSplit
from frenzy.core.plan import ParallelPlan
from frenzy.core.training import Method, TrainingConfig
from frenzy.memory.layer_inventory import Kernel, attention_kernel, checkpointed_input_bytes


def selective_is_modelled(arch: ModelArch, training: TrainingConfig) -> bool:
    """Layers whose projections are all plain matmuls MARP knows: not MoE experts (routed grouped
    GEMMs), not QLoRA (bitsandbytes' dequantise-and-matmul), not a profiled family (unknown module
    tree), not latent attention. Elsewhere selective is predicted as no recomputation (an upper
    bound: SAC keeps a subset of the layer's tensors plus projection outputs)."""
    return not (arch.is_moe or arch.profile_key or arch.mla_kv_rank or training.method is Method.QLORA)


def projection_output_bytes_per_token(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan) -> int:
    """Bytes per token of every projection output of one layer (the `mm`/`addmm` outputs SAC keeps),
    adapters included: a column-split projection's output is sharded, a row-split one's is the
    full (partial-sum) width on every rank."""
    c = training.precision.compute_bytes
    total = 0
    for lin in arch.linears:
        if lin.per_expert:
            continue
        total += c * _local_out_features(lin, plan.tp)
        if training.method is not Method.FULL and lin.targets & training.trainable_targets:
            total += c * (training.lora_rank + _local_out_features(lin, plan.tp))
    return total


def _local_out_features(lin: Linear, tp: int) -> int:
    return lin.out_features // tp if lin.split is TpSplit.COLUMN else lin.out_features


def attention_kernel_output_bytes_per_token(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan) -> int:
    """A fused kernel's outputs: the attention output (heads x head_dim in the compute dtype) and an
    fp32 logsumexp per head; eager and math attention are composite ops, all recomputed."""
    if attention_kernel(arch, training) not in (Kernel.FLASH, Kernel.EFFICIENT):
        return 0
    heads = arch.num_heads // plan.tp
    return training.precision.compute_bytes * heads * arch.head_dim + 4 * heads


def selective_cache_bytes_per_token(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan) -> int:
    """SAC's cache of one layer: the outputs the policy saves (without the checkpointed input)."""
    return (projection_output_bytes_per_token(arch, training, plan)
            + attention_kernel_output_bytes_per_token(arch, training, plan))


def selective_layer_bytes_per_token(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan) -> int:
    """What one layer keeps from its forward to its backward under selective recomputation: its
    checkpointed input (the residual stream, sequence-sharded under sequence parallelism) and SAC's cache."""
    width = arch.hidden_size // (plan.tp if plan.sequence_parallel else 1)
    return checkpointed_input_bytes(arch, training) * width + selective_cache_bytes_per_token(arch, training, plan)

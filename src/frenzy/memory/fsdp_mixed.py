"""The fsdp2-param mixed-precision mode: FSDP2's MixedPrecisionPolicy(param_dtype=bf16,
reduce_dtype=fp32) over fp32 sharded masters (core.plan.MixedPrecisionMode.FSDP2_PARAM).

Per rank (n_t trainable, n_f frozen parameters of the stage; L layers; the root unit is everything
outside the decoder layers: embedding, final norm, LM head):
  weights      fp32 masters and the 16-bit frozen base, sharded: (4 n_t + 2 n_f) / dp (states.py)
               + bf16 all-gathered parameters: the root unit (2 B x root) through forward, and again
               from the start of backward (the root's pre-backward all-gather, which prefetches the
               last layer) to its end; under ZeRO-1/2 every layer from its forward to its backward,
               under ZeRO-3 the layer that runs and, in backward, the prefetched next one; and at
               forward end the flat all-gather buffer of the last unshard (2 B x one layer), which
               FSDP2 keeps (`all_gather_state`) until the next all-gather starts;
  gradients    fp32 sharded: 4 n_t / dp;
  optimizer    as ZeRO-1 (sharded at every stage);
  temporaries  in backward, the bf16 unsharded gradients of the unit being reduced (the root's,
               LM head and embedding included, live until backward ends; a tied embedding's second
               one beside the head's), and the fp32 reduce-scatter input they are cast into (4 B per
               unsharded trainable parameter of one unit), which FSDP2 holds until the next unit's
               reduce-scatter; a unit reshards its parameters before it reduces;
  activations  no autocast: every op sees bf16 parameters, so the layers keep what pure bf16
               training keeps (16-bit residual stream, norms' normalised outputs in bf16, no
               per-matmul casts of an fp32 input). HF's RMSNorm upcasts to fp32 inside and casts
               back to the input dtype; LayerNorm with bf16 weights runs in bf16. So the activation,
               logits and backward-temporary formulas are those of Precision.BF16.
No autocast weight copies. Source: torch.distributed.fsdp._fully_shard (_fsdp_param.py,
_fsdp_collectives.py, _fsdp_param_group.py), validated against the FSDP2 trace (trace/fsdp.py).
"""

from __future__ import annotations

from dataclasses import replace

from frenzy.core.model import ModelArch
from frenzy.core.plan import ParallelPlan
from frenzy.core.training import Method, Precision, TrainingConfig
from frenzy.memory.states import StageParams


def compute_training(training: TrainingConfig, plan: ParallelPlan) -> TrainingConfig:
    """The training settings activations follow: pure bf16 in the fsdp2-param mode (parameters reach
    every op as bf16, no autocast), else the job's own."""
    if plan.fsdp_param_dtype and training.precision is Precision.BF16_MIXED:
        return replace(training, precision=Precision.BF16)
    return training


def gathered_layer_bytes(params: StageParams) -> int:
    """One decoder layer's parameters all-gathered in bf16: 2 B x (stage params - root) / L."""
    return 2 * (params.total - params.root) // max(params.layers, 1)


def gathered_root_bytes(params: StageParams) -> int:
    """The root unit's parameters (embedding, final norm, head) all-gathered in bf16: 2 B x root."""
    return 2 * params.root


def layer_trainable(params: StageParams, training: TrainingConfig) -> int:
    """Trainable parameters of one decoder layer (full: all of it; LoRA: its adapters)."""
    root = params.root if training.method is Method.FULL else 0
    return (params.trainable - root) // max(params.layers, 1)


def root_trainable(params: StageParams, training: TrainingConfig) -> int:
    return params.root if training.method is Method.FULL else 0


def reduce_bytes(trainable: int) -> int:
    """A unit's backward leaves its bf16 unsharded gradients (2 B each) and the fp32 reduce-scatter
    input they are cast into (4 B each) alive together: reduce_dtype=fp32."""
    return 6 * trainable


def reduce_scatter_input_bytes(trainable: int) -> int:
    """The fp32 reduce-scatter input of a unit (4 B per unsharded trainable parameter), which FSDP2
    holds (`reduce_scatter_state`) until the next unit's reduce-scatter."""
    return 4 * trainable


def sharded_root_gradient_bytes(params: StageParams, training: TrainingConfig, plan: ParallelPlan) -> int:
    """The root unit's fp32 sharded gradients, 4 B x root / dp: allocated when backward ends."""
    return 4 * root_trainable(params, training) // plan.dp


def tied_embedding_gradient_bytes(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan, stage: int) -> int:
    """A tied embedding's backward produces a second full-size bf16 gradient (2 B x vocab x h / tp)
    beside the head's, on the unsharded parameter, before autograd sums them."""
    if stage != 0 or not arch.tie_word_embeddings or plan.pp > 1 or training.method is not Method.FULL:
        return 0
    return 2 * arch.vocab_size * arch.hidden_size // plan.tp

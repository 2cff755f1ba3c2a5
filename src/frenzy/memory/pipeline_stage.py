"""What a 1F1B pipeline stage holds beyond its layers' saved activations, as the worker runs stages
(torch.distributed.pipelining.Schedule1F1B, frenzy.train.pipeline; traced by memory/trace/pipeline_stage).

Stage s of pp with m micro-batches per step runs min(m, pp - s) forwards before its first backward, so
that many micro-batches are in flight at its peak. Each keeps, until its own backward:
  - its layers' saved activations (estimate: per-layer formulas times the in-flight count);
  - its autocast weight copies: autocast caches casts only within one forward's autocast region, so
    every in-flight forward saved its own copies for its backward (none in checkpointed layers);
  - the stage's output, which the schedule caches: the hidden states sent on, or on the last stage
    the logits in the compute dtype (the unpipelined step drops them as soon as the loss exists).
A first stage that trains its embedding gets, in every backward but a step's first, the embedding's
dense gradient as a temporary beside the one it is added into.
And the schedule allocates, at its first step and for the whole run, one receive buffer per
micro-batch in each direction it receives: activations from the previous stage, output gradients
from the next ([micro_batch, seq, hidden] in the residual stream's dtype each).
"""

from __future__ import annotations

from frenzy.core.model import ModelArch
from frenzy.core.plan import ParallelPlan
from frenzy.core.training import Method, TrainingConfig
from frenzy.memory.layer_inventory import checkpointed_input_bytes


def in_flight_micro_batches(plan: ParallelPlan, stage: int) -> int:
    """Micro-batches whose forward ran and backward did not, at the first backward of `stage`."""
    return min(plan.grad_accum, plan.pp - stage) if plan.pp > 1 else 1


def _hidden_bytes(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan, seq_len: int) -> int:
    """One micro-batch of hidden states between stages, in the residual stream's dtype."""
    return plan.micro_batch * seq_len * arch.hidden_size * checkpointed_input_bytes(arch, training)


def receive_buffer_bytes(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan, stage: int,
                         seq_len: int) -> int:
    """The schedule's persistent receive buffers: grad_accum of them per direction received
    (activations unless first, output gradients unless last)."""
    if plan.pp == 1:
        return 0
    directions = (stage > 0) + (stage < plan.pp - 1)
    return directions * plan.grad_accum * _hidden_bytes(arch, training, plan, seq_len)


def cached_output_bytes(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan, stage: int,
                        seq_len: int) -> int:
    """One in-flight micro-batch's stage output, cached until its backward: hidden states, or on the
    last stage the logits (vocabulary split over tp) in the compute dtype."""
    if plan.pp == 1:
        return 0
    if stage < plan.pp - 1:
        return _hidden_bytes(arch, training, plan, seq_len)
    return plan.micro_batch * seq_len * arch.vocab_size // plan.tp * training.precision.compute_bytes


def embedding_gradient_temporary_bytes(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan,
                                       stage: int) -> int:
    """The first stage's embedding backward writes a dense [vocab, hidden] gradient (param dtype),
    then adds it into the accumulated one: both are alive at once."""
    if stage != 0 or training.method is not Method.FULL:
        return 0
    return arch.vocab_size * arch.hidden_size // plan.tp * training.precision.param_bytes

"""What the training worker can run. Every path that offers plans (the CLI, `GET /v1/plans`, the control
loop, the simulator) asks this one module, so a plan shown is a plan the worker runs."""

from __future__ import annotations

from frenzy.core.job import JobSpec
from frenzy.core.plan import ParallelPlan
from frenzy.core.tensor_parallel import tp_unsupported_reason, worker_tp_families
from frenzy.core.training import Recompute

# Model families whose layers the worker tensor-parallelises: those of frenzy.core.tensor_parallel.TP_RULES
# without a reason to stay out (the tracer splits the same table).
TENSOR_PARALLEL_FAMILIES = worker_tp_families()


def unsupported_reason(spec: JobSpec, plan: ParallelPlan) -> str | None:
    """None when the worker runs `plan` for `spec`; otherwise why it does not (shown to the user)."""
    if plan.pp > 1 and (reason := _pipeline_reason(spec, plan)):
        return reason
    if plan.tp > 1:
        model = spec.model
        reason = tp_unsupported_reason(model.family, plan.tp, heads=model.num_heads, kv_heads=model.num_kv_heads,
                                       experts=model.num_experts, qk_norm_full_width=model.qk_norm_full_width)
        if reason:
            return reason
    if plan.sequence_parallel and spec.seq_len % plan.tp:
        return f"sequence parallelism splits the sequence: seq_len {spec.seq_len} does not divide by tp={plan.tp}"
    if plan.recompute is Recompute.ATTENTION:
        return "the worker runs recompute none, selective or full, not attention-core recomputation"
    if plan.recompute is not Recompute.NONE and not spec.model.recompute:
        return f"transformers' {spec.model.family} does not support activation checkpointing: recompute none only"
    return None


# Families whose decoder takes a stage's hidden states as `inputs_embeds` unchanged (no position
# embedding added or scale applied to them), which is how the worker runs a later pipeline stage.
PIPELINE_FAMILIES = frozenset({"llama", "mistral", "qwen2", "qwen3"})


def _pipeline_reason(spec: JobSpec, plan: ParallelPlan) -> str | None:
    if spec.model.family not in PIPELINE_FAMILIES:
        return f"the worker cannot split {spec.model.family} into pipeline stages"
    if plan.tp > 1:
        return "the worker runs pipeline stages without tensor parallelism"
    if plan.grad_accum < plan.pp:
        return f"a 1F1B pipeline of {plan.pp} stages needs at least {plan.pp} micro-batches per step"
    return None

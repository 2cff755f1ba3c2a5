"""What the layers of gpt-oss and Llama 4 keep where they depart from the common inventory
(frenzy.memory.layer_inventory): gpt-oss's eager attention with sinks, Llama 4's MoE block."""

from __future__ import annotations

from frenzy.core.model import ModelArch
from frenzy.core.plan import ParallelPlan
from frenzy.core.training import Method, TrainingConfig
from frenzy.memory.layer_inventory import _activation_saved_bytes, _input_saves, _trains, checkpointed_input_bytes


def sink_scores_saved(training: TrainingConfig) -> int:
    """Bytes per attention score of gpt-oss's eager attention with sinks: the scores are concatenated
    with the sink parameters (one logit more per row) and the softmax runs in the dtype of that
    concatenation, fp32 when the sinks are fp32 masters (full fine-tuning under autocast), else the
    compute dtype; the 16-bit copy that multiplies v is then a second tensor. The max subtracted for
    stability keeps an int64 index per row (counted by the caller)."""
    c = training.precision.compute_bytes
    softmax = training.precision.param_bytes if training.method is Method.FULL else c
    return softmax + (c if softmax != c else 0)


def llama4_moe_saved(arch: ModelArch, training: TrainingConfig, plan: ParallelPlan) -> dict[str, int]:
    """Llama 4's MoE block, bytes per token. transformers runs every expert on every token: the
    normalised input is repeated E times and scaled by the sigmoid routing scores (zero for the
    experts not picked), then two autocast-cast bmm's (not grouped-mm) run all experts. The scaling
    keeps the repeated input (the scores' gradient) and the scores; the first bmm keeps its scaled
    input when the experts train (its 16-bit autocast copy under *-mixed); silu keeps the gate_up
    output (the gate is a view of it), the product keeps act(gate) (and up, the same storage), and
    the second bmm keeps the product when the experts train. The shared expert is a gated MLP of
    nn.Linear modules; its output takes the routed sum in place (nothing kept). Routing: top-k of the
    logits (int64 index), a -inf tensor scattered with the k values, an fp32 sigmoid (kept) and its
    16-bit copy that scales the input (kept)."""
    c, h, experts = training.precision.compute_bytes, arch.hidden_size, arch.num_experts
    experts_train = training.method is Method.FULL
    n = checkpointed_input_bytes(arch, training)  # the norm output: the residual stream's dtype
    inter, shared = arch.intermediate_size // plan.tp, arch.shared_expert_size // plan.tp
    cast = 2 if training.precision.is_mixed else 0
    routed = experts * n * h + (experts * c * h if experts_train else 0)
    body = experts * (2 * c * inter + c * inter + (c * inter if experts_train else 0))
    body += (_activation_saved_bytes(arch, training.precision, c) + 2 * c) * shared
    body += c * shared if _trains(training, {"down"}) else 0
    router = 8 * arch.experts_per_token + 4 * experts + c * experts + (cast * h if experts_train else 0)
    return {"mlp_input": _input_saves(arch, training, {"gate", "up"}, h), "router": router,
            "mlp_body": routed + body}

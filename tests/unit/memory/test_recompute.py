"""Full activation recomputation: what the checkpoints keep and which autocast copies outlive them."""

import pytest

from frenzy.core.hf_config import load_model
from frenzy.core.job import JobSpec
from frenzy.core.plan import ParallelPlan
from frenzy.core.training import Attention, Method, Precision, Recompute, TrainingConfig
from frenzy.memory import activations as act
from frenzy.memory import states
from frenzy.memory.estimate import estimate
from frenzy.memory.result import Phase

RECOMPUTE = ParallelPlan(micro_batch=4, recompute=Recompute.FULL)


@pytest.mark.parametrize("model,method,stream_bytes", [
    ("meta-llama/Llama-2-7b-hf", Method.FULL, 4),  # fp32 master embeddings: an fp32 stream
    ("meta-llama/Llama-2-7b-hf", Method.LORA, 2),  # 16-bit frozen base: a 16-bit stream
    ("meta-llama/Llama-2-7b-hf", Method.QLORA, 2),
    ("facebook/opt-1.3b", Method.LORA, 2),
    ("facebook/opt-1.3b", Method.QLORA, 4),  # Linear4bit returns the fp32 LayerNorm output's dtype
    ("facebook/opt-350m", Method.LORA, 4),  # post-LN: the fp32 LayerNorm output is the stream
    ("bigscience/bloom-560m", Method.LORA, 4),  # the embedding LayerNorm starts an fp32 stream
])
def test_checkpoints_keep_the_residual_stream_in_its_dtype_under_autocast(model, method, stream_bytes):
    arch = load_model(model)
    training = TrainingConfig(precision=Precision.BF16_MIXED, method=method)
    kept = act.stored_bytes_per_token_per_layer(arch, training, RECOMPUTE, 2048)
    assert kept == stream_bytes * arch.hidden_size


def _estimate(recompute: Recompute):
    arch = load_model("meta-llama/Llama-3.2-1B")
    training = TrainingConfig(precision=Precision.BF16_MIXED)
    plan = ParallelPlan(micro_batch=4, recompute=recompute)
    job = JobSpec(model=arch, training=training, seq_len=2048, global_batch=plan.global_batch)
    params = states.stage_params(arch, training, plan, 0)
    return arch, estimate(job, plan), states.weight_bytes(params, training, plan)


def test_recomputation_keeps_only_the_lm_heads_autocast_copy_at_the_loss():
    """Llama-3.2-1B bf16-mixed, mb4 s2048 (H100: 27.26 GiB): the layers' 16-bit weight copies die
    with autocast's cache, the tied head's copy (vocab x hidden) is saved by its matmul."""
    arch, result, weights = _estimate(Recompute.FULL)
    assert result.peak_phase is Phase.BACKWARD
    assert result.breakdown["weights"] == weights + 2 * arch.vocab_size * arch.hidden_size
    assert result.allocated_bytes / 2**30 == pytest.approx(27.26, rel=0.01)


def test_without_recomputation_backward_keeps_every_autocast_copy():
    """fp32 masters (4 B) plus a 16-bit copy of every matmul weight (2 B): all parameters but the
    norms' (two per layer and the final one), the tied embedding serving as the LM head."""
    arch, result, _ = _estimate(Recompute.NONE)
    norms = (2 * arch.num_layers + 1) * arch.hidden_size
    assert result.peak_phase is Phase.BACKWARD
    assert result.breakdown["weights"] == 4 * arch.num_params + 2 * (arch.num_params - norms)


def test_selective_keeps_the_input_projection_outputs_and_attention_kernel_output():
    """Llama-3.2-1B, bf16-mixed, flash: by hand from the config (h 2048, 32 heads x 64, 8 KV heads,
    intermediate 8192): the fp32 input 4h; 16-bit outputs of q (2048), k and v (512 each), o (2048),
    gate and up (8192 each), down (2048); the kernel's output (2048) and fp32 logsumexp per head."""
    arch = load_model("meta-llama/Llama-3.2-1B")
    training = TrainingConfig(precision=Precision.BF16_MIXED)
    plan = ParallelPlan(micro_batch=4, recompute=Recompute.SELECTIVE)
    projections = 2 * (2048 + 512 + 512 + 2048 + 8192 + 8192 + 2048)
    by_hand = 4 * 2048 + projections + 2 * 2048 + 4 * 32
    assert act.stored_bytes_per_token_per_layer(arch, training, plan, 2048) == by_hand == 59_520
    none = act.stored_bytes_per_token_per_layer(arch, training, ParallelPlan(micro_batch=4), 2048)
    full = act.stored_bytes_per_token_per_layer(arch, training, RECOMPUTE, 2048)
    assert full < by_hand < none


def test_selective_under_eager_attention_keeps_no_attention_tensor():
    """Eager attention's matmuls are batched (bmm), outside the policy: only projections and the input."""
    arch = load_model("meta-llama/Llama-3.2-1B")
    training = TrainingConfig(precision=Precision.BF16, attention=Attention.EAGER)
    plan = ParallelPlan(micro_batch=2, recompute=Recompute.SELECTIVE)
    assert act.stored_bytes_per_token_per_layer(arch, training, plan, 2048) == 2 * 2048 + 2 * 23_552


def test_selective_measured_on_the_h100_lies_between_none_and_full():
    """Llama-3.2-1B bf16-mixed mb4 s2048 on an H100 (tests/data/gpu_memory_h100.csv): none 43.84 GiB,
    selective 33.53 GiB, full 27.26 GiB allocated."""
    for recompute, measured_gib in ((Recompute.NONE, 43.84), (Recompute.SELECTIVE, 33.53), (Recompute.FULL, 27.26)):
        _, result, _ = _estimate(recompute)
        assert result.allocated_bytes / 2**30 == pytest.approx(measured_gib, rel=0.01), recompute


def test_attention_core_recomputation_is_refused_by_the_worker_and_warned_about_under_flash():
    from frenzy.core.training import recompute_warning
    from frenzy.core.worker_support import unsupported_reason

    arch = load_model("meta-llama/Llama-3.2-1B")
    job = JobSpec(model=arch, training=TrainingConfig(), seq_len=2048, global_batch=4)
    assert "attention-core" in unsupported_reason(job, ParallelPlan(micro_batch=4, recompute=Recompute.ATTENTION))
    assert unsupported_reason(job, ParallelPlan(micro_batch=4, recompute=Recompute.SELECTIVE)) is None
    assert "equals 'none'" in recompute_warning(Recompute.ATTENTION, Attention.FLASH)
    assert recompute_warning(Recompute.ATTENTION, Attention.EAGER) is None
    assert recompute_warning(Recompute.SELECTIVE, Attention.FLASH) is None

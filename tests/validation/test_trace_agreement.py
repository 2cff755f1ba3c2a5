"""MARP against the fake-tensor trace of the real Hugging Face training step, on two-layer versions
of catalog models across families, precisions, methods, recomputation, attention and tensor
parallelism (frenzy.memory.validation.fast_cases). Targets: allocated peak within 3%, every
breakdown term within 5% (or 0.5% of the peak). The full matrix is bench/trace_validation.py."""

import pytest

pytest.importorskip("torch", reason="the trace needs the 'trace' extra (torch, transformers, peft)")
pytest.importorskip("transformers", reason="the trace needs the 'trace' extra (torch, transformers, peft)")

from frenzy.memory.validation import _case, compare, fast_cases  # noqa: E402

CASES = fast_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_marp_matches_the_trace(case):
    result = compare(case)
    assert not result.misses(), "; ".join(result.misses())


# Selective activation checkpointing (frenzy.train.recompute's policy, run by the tracer as by the
# worker): families (RMSNorm/LayerNorm, fused qkv, biases, q/k norms, partial rotary, parallel
# residual), precisions (autocast, bf16, fp32 with the math kernel), eager attention, LoRA, TP and
# sequence lengths, on two layers; then two deeper cases where what the layers keep is a large share
# of the peak (LoRA with a small vocabulary: about 80%; eight full fine-tuned layers: about 20%).
SMALL_VOCAB = (("vocab_size", 4096), ("bos_token_id", None), ("eos_token_id", None))
SELECTIVE_CASES = [
    _case("meta-llama/Llama-3.2-1B", recompute="selective", mb=4, seq=1024),
    _case("meta-llama/Llama-3.2-1B", recompute="selective", precision="fp32", mb=1, seq=512),
    _case("meta-llama/Llama-3.2-1B", recompute="selective", precision="bf16", attention="eager", mb=2, seq=512),
    _case("meta-llama/Llama-3.2-1B", recompute="selective", method="lora", targets=("all-linear",), mb=4, seq=512),
    _case("meta-llama/Llama-3.2-1B", recompute="selective", tp=2, mb=2, seq=2048),
    _case("openai-community/gpt2", recompute="selective", mb=4, seq=1024),
    _case("EleutherAI/pythia-160m", recompute="selective", mb=4, seq=512),
    _case("Qwen/Qwen2.5-0.5B", recompute="selective", mb=4, seq=2048),
    _case("Qwen/Qwen3-0.6B", recompute="selective", precision="bf16", mb=2, seq=1024),
    _case("microsoft/phi-2", recompute="selective", precision="bf16", mb=2, seq=1024),
    _case("meta-llama/Llama-3.2-1B", recompute="selective", method="lora", targets=("all-linear",), mb=8, seq=2048,
          layers=4, overrides=SMALL_VOCAB),
    _case("meta-llama/Llama-3.2-1B", recompute="selective", mb=4, seq=1024, layers=8),
]


@pytest.mark.parametrize("case", SELECTIVE_CASES, ids=[c.label for c in SELECTIVE_CASES])
def test_selective_checkpointing_matches_the_trace_within_1_percent(case):
    result = compare(case)
    assert abs(result.peak_error) <= 0.01, f"allocated peak off by {result.peak_error:+.2%}"

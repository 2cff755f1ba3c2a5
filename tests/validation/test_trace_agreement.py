"""MARP against the fake-tensor trace of the real Hugging Face training step, on two-layer versions
of catalog models across families, precisions, methods, recomputation, attention and tensor
parallelism (frenzy.memory.validation.fast_cases). Targets: allocated peak within 3%, every
breakdown term within 5% (or 0.5% of the peak). The full matrix is bench/trace_validation.py."""

import tempfile
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the trace needs the 'trace' extra (torch, transformers, peft)")
pytest.importorskip("transformers", reason="the trace needs the 'trace' extra (torch, transformers, peft)")

from frenzy.core.hf_config import load_model  # noqa: E402
from frenzy.core.job import JobSpec  # noqa: E402
from frenzy.memory.estimate import estimate  # noqa: E402
from frenzy.memory.selective import selective_cache_bytes_per_token  # noqa: E402
from frenzy.memory.trace import trace_step  # noqa: E402
from frenzy.memory.validation import _case, compare, fast_cases  # noqa: E402

CASES = fast_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_marp_matches_the_trace(case):
    result = compare(case)
    assert not result.misses(), "; ".join(result.misses())


# Selective activation checkpointing (frenzy.train.recompute's policy, run by the tracer as by the
# worker): families (RMSNorm/LayerNorm, fused qkv, biases, q/k norms, partial rotary, parallel
# residual), precisions (autocast, bf16, fp32 with the math kernel), eager attention, LoRA, TP and
# sequence lengths. Two checks per trace: the allocated peak within 1%, and what one middle layer adds
# in the measured forward (SAC's cache: the layer's input already exists) equal to MARP's to 1%.
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
]


@pytest.mark.parametrize("case", SELECTIVE_CASES, ids=[c.label for c in SELECTIVE_CASES])
def test_selective_checkpointing_matches_the_trace_within_1_percent(case):
    with tempfile.TemporaryDirectory() as folder:
        model = case.config_path(Path(folder))
        arch = load_model(model)
        job = JobSpec(model=arch, training=case.training, seq_len=case.seq_len, global_batch=case.plan.global_batch)
        formula = estimate(job, case.plan)
        traced = trace_step(model, case.training, case.plan, case.seq_len)
    assert formula.allocated_bytes == pytest.approx(traced.estimate.allocated_bytes, rel=0.01)
    tokens = case.plan.micro_batch * case.seq_len
    cache = selective_cache_bytes_per_token(arch, case.training, case.plan) * tokens
    assert cache == pytest.approx(traced.activation_bytes_per_layer, rel=0.01)

"""MARP against the fake-tensor trace of the real Hugging Face training step, on two-layer versions
of catalog models across families, precisions, methods, recomputation, attention and tensor
parallelism (frenzy.memory.validation.fast_cases). Targets: allocated peak within 3%, every
breakdown term within 5% (or 0.5% of the peak). The full matrix is bench/trace_validation.py."""

import pytest

pytest.importorskip("torch", reason="the trace needs the 'trace' extra (torch, transformers, peft)")
pytest.importorskip("transformers", reason="the trace needs the 'trace' extra (torch, transformers, peft)")

from frenzy.memory.validation import compare, fast_cases  # noqa: E402

CASES = fast_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_marp_matches_the_trace(case):
    result = compare(case)
    assert not result.misses(), "; ".join(result.misses())

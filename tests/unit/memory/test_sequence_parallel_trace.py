"""MARP against the fake-tensor trace of one rank of a tp2 + sequence-parallel plan, the trace running
the worker's split (frenzy.memory.trace.sequence_parallel: the stream, norms and final norm on the
rank's sequence shard, each block's gathered input kept by its projections): allocated peak within 1%.
And the independent check of the SP shapes: the layer's saved bytes shrink by exactly the norms'
share, computed here from the RMSNorm's saved tensors (fp32 input copy, 16-bit output, fp32 rstd)."""

import dataclasses

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from frenzy.memory.validation import _case, compare  # noqa: E402

CASES = [dict(precision="bf16", mb=2), dict(precision="bf16-mixed", method="lora", targets=("all-linear",), mb=2),
         dict(precision="bf16", recompute="full", mb=4)]


def _with_sp(case, sp: bool):
    return dataclasses.replace(case, plan=dataclasses.replace(case.plan, sequence_parallel=sp))


@pytest.mark.parametrize("settings", CASES, ids=["bf16", "lora-mixed", "bf16-full-recompute"])
def test_marp_matches_the_sequence_parallel_trace_within_1_percent(settings):
    result = compare(_with_sp(_case("meta-llama/Llama-3.2-1B", tp=2, seq=512, **settings), True))
    assert abs(result.peak_error) < 0.01, result.peak_error


def test_sequence_parallel_shards_the_norms_saved_tensors():
    case = _case("meta-llama/Llama-3.2-1B", precision="bf16", tp=2, seq=512, mb=2)
    plain, sharded = compare(_with_sp(case, False)), compare(_with_sp(case, True))
    hidden, tokens, layers = 2048, 2 * 512, 2
    # an RMSNorm keeps its fp32 input copy and its bf16 normalised output (6 B per element) and an fp32
    # rstd per token; 2 per layer plus the final norm; half of them on each rank's sequence shard
    norms = (2 * layers + 1) * (6 * hidden + 4) * tokens
    saved = plain.traced.breakdown["activations"] - sharded.traced.breakdown["activations"]
    assert saved == pytest.approx(norms / 2, rel=0.01)

"""The decoder layer's own tensors beside a grouped-mm MoE block at the forward peak, read off the
fake-tensor trace of Qwen2-MoE at tp 4 with LoRA (the peak sits inside the last layer's experts):
the stream-shaped tensors the last layer made and still holds there, but no longer holds when it
returns, against `moe_layer_locals_bytes_per_token` (and the block input that
`moe_forward_temporary_bytes_per_token` counts for frozen experts)."""

import re
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from frenzy.core.job import JobSpec  # noqa: E402
from frenzy.memory import activations as act  # noqa: E402
from frenzy.memory.trace import step  # noqa: E402
from frenzy.memory.trace.engine import fold_inplace_accumulations  # noqa: E402
from frenzy.memory.trace.recorder import HOST  # noqa: E402
from frenzy.memory.trace.tracer import record_steps  # noqa: E402
from frenzy.memory.validation import MOE_TP_MODELS, _case, load_model  # noqa: E402

HIDDEN, MICRO_BATCH, SEQ, TP = 512, 2, 1024, 4


def _live(log, end: int) -> set[int]:
    live: set[int] = set()
    for event in log.events[:end]:
        alloc = abs(event) - 1
        if log.roles[alloc] != HOST:
            (live.add if event > 0 else live.discard)(alloc)
    return live


def _forward_peak(log) -> int:
    """Position of the measured step's allocated forward peak."""
    start, end = log.marks[f"step{step.MEASURED_STEP}.forward"], log.marks[f"step{step.MEASURED_STEP}.backward"]
    live, best, at = _live(log, start), -1, start
    level = sum(log.sizes[a] for a in live)
    for position in range(start, end):
        alloc = abs(log.events[position]) - 1
        if log.roles[alloc] == HOST:
            continue
        level += log.sizes[alloc] if log.events[position] > 0 else -log.sizes[alloc]
        if level > best:
            best, at = level, position + 1
    return at


def _last_layer_stream_transients(case, rows: int) -> list[str]:
    """Origins of the (batch, rows, hidden) tensors the last layer made that are live at the forward
    peak but freed by the time the layer returns."""
    with tempfile.TemporaryDirectory() as folder:
        model = case.config_path(Path(folder))
        log = fold_inplace_accumulations(record_steps(model, case.training, case.plan, case.seq_len,
                                                      keep_origins=True).log)
    peak = _forward_peak(log)
    assert log.marks["layer_pre.1"] < peak < log.marks["layer_post.1"], "the forward peak is inside the last layer"
    made = _live(log, peak) - _live(log, log.marks["layer_pre.1"]) - _live(log, log.marks["layer_post.1"])
    shape = re.compile(rf"\({MICRO_BATCH}, {rows}, {HIDDEN}\) bfloat16$")
    return [log.origins[a] for a in made if shape.search(log.origins[a])]


def _qwen2_moe_lora(sp: bool):
    model, overrides = MOE_TP_MODELS["qwen2_moe"]
    return _case(model, tp=TP, mb=MICRO_BATCH, seq=SEQ, sp=sp, method="lora", targets=("all-linear",),
                 overrides=overrides + (("vocab_size", 4096),))


def _locals_bytes(case) -> int:
    with tempfile.TemporaryDirectory() as folder:
        arch = load_model(case.config_path(Path(folder)), profiled=case.profiled)
    job = JobSpec(model=arch, training=case.training, seq_len=case.seq_len, global_batch=case.plan.global_batch)
    return act.moe_layer_locals_bytes_per_token(job.model, job.training, case.plan) * MICRO_BATCH * SEQ


def test_sequence_parallel_keeps_the_residual_and_the_norm_output_shards():
    case = _qwen2_moe_lora(sp=True)
    shards = _last_layer_stream_transients(case, SEQ // TP)
    # the residual (the add after attention) and the post-attention norm's output, 16-bit sequence shards
    assert sorted(o.split()[0] for o in shards) == ["aten.add.Tensor", "aten.mul.Tensor"]
    assert _locals_bytes(case) == 2 * 2 * MICRO_BATCH * (SEQ // TP) * HIDDEN


def test_without_sequence_parallelism_the_residual_sits_beside_the_block_input():
    case = _qwen2_moe_lora(sp=False)
    whole = _last_layer_stream_transients(case, SEQ)
    # the residual, and the norm output that is the block's input (counted with the block's temporaries)
    assert sorted(o.split()[0] for o in whole) == ["aten.add.Tensor", "aten.mul.Tensor"]
    assert _locals_bytes(case) == 2 * MICRO_BATCH * SEQ * HIDDEN

"""MARP against the CUDA allocator on an NVIDIA H200, for plans Frenzy's own worker ran
(tests/data/gpu_finetune_h200.jsonl, made by bench/gpu_finetune.py; docs/ACCURACY.md#fine-tuning-on-an-h200).

Each row carries the job and plan it ran; MARP is recomputed here from them, so a change to MARP is
held against what the GPU measured."""

import json
from pathlib import Path

import pytest

from frenzy.control.request import JobRequest
from frenzy.core import catalog
from frenzy.core.plan import MixedPrecisionMode, ParallelPlan
from frenzy.core.training import ZeroStage
from frenzy.memory.estimate import estimate

ROWS = [json.loads(line) for line in (Path(__file__).parents[1] / "data" / "gpu_finetune_h200.jsonl").read_text()
        .splitlines()]
# Rows where the worker ran what MARP models. Two rows are kept as the record of gaps, not asserted:
# text-lora-1.5b ran before the worker kept a LoRA base in 16 bits (frenzy.train.model.frozen_base_dtype:
# its fp32 base and autocast's bf16 copies of it were the +5.8 GiB), and autocast-zero3-1b-dp8 shows
# MARP 10% under FSDP2's autocast ZeRO-3 (a known gap, docs/ACCURACY.md).
AGREED = ["fsdp2-param-1b-dp8", "fsdp2-param-3b-dp8", "chat-sft-1b", "text-1b"]


def _predicted(row):
    request = JobRequest.from_json({"model": row["model"], "seq_len": row["seq_len"], "method": row["method"],
                                    "precision": row["precision"], "global_batch": row["micro_batch"]
                                    * row["grad_accum"] * row["dp"]})
    plan = ParallelPlan(dp=row["dp"], zero=ZeroStage(row["zero"]), micro_batch=row["micro_batch"],
                        grad_accum=row["grad_accum"], mixed_precision=MixedPrecisionMode.parse(row["mixed_precision"]))
    return estimate(request.job_spec(), plan, catalog.gpu_type(row["gpu"]))


@pytest.mark.parametrize("name", AGREED)
def test_allocated_peak_within_one_percent_and_required_covers_it(name):
    row = next(r for r in ROWS if r["config"] == name)
    assert row["gpu"].startswith("NVIDIA H200")
    predicted = _predicted(row)
    assert predicted.allocated_bytes == pytest.approx(row["allocated"], rel=0.01)
    assert predicted.required_bytes >= row["allocated"]


def test_the_rows_cover_the_fsdp2_mixed_mode_and_a_whole_job():
    modes = {r["mixed_precision"] for r in ROWS if r["config"] in AGREED}
    assert modes == {"fsdp2-param", "autocast"}
    assert any(r["kind"] == "job" and "model.safetensors" in r["artifacts"] for r in ROWS if r["config"] in AGREED)

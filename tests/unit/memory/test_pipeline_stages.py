"""MARP against the fake-tensor trace of one pipeline stage (the worker's stage model, run in
Schedule1F1B's order with the schedule's receive buffers): allocated bytes within 1%, for the first
stage holding in-flight micro-batches, a middle one, and the last one (logits cached until backward)."""

from __future__ import annotations

import pytest

from frenzy.core.hf_config import load_model
from frenzy.core.job import JobSpec
from frenzy.core.plan import ParallelPlan
from frenzy.core.training import Method, Precision, Recompute, TrainingConfig
from frenzy.memory.estimate import estimate
from frenzy.memory.pipeline_stage import in_flight_micro_batches
from frenzy.memory.trace import trace_step
from frenzy.memory.trace.pipeline_stage import one_f_one_b

pytestmark = pytest.mark.slow
SEQ = 512


@pytest.mark.parametrize("model,method,recompute,pp,grad_accum,stage", [
    ("Qwen/Qwen2.5-0.5B", Method.FULL, Recompute.NONE, 2, 4, 0),  # tied embeddings, steady state with gradients
    ("Qwen/Qwen2.5-0.5B", Method.FULL, Recompute.NONE, 4, 4, 0),  # warm-up only: 4 in flight, then backwards
    ("Qwen/Qwen2.5-0.5B", Method.FULL, Recompute.NONE, 2, 4, 1),  # last stage: logits cached until backward
    ("Qwen/Qwen2.5-0.5B", Method.FULL, Recompute.NONE, 4, 8, 2),  # middle: receive buffers both ways
    ("Qwen/Qwen3-0.6B", Method.LORA, Recompute.NONE, 2, 4, 0),
    ("Qwen/Qwen3-0.6B", Method.FULL, Recompute.FULL, 2, 4, 0),
])
def test_marp_matches_the_trace_of_a_pipeline_stage(model, method, recompute, pp, grad_accum, stage):
    training = TrainingConfig(precision=Precision.BF16_MIXED, method=method)
    plan = ParallelPlan(pp=pp, micro_batch=1, grad_accum=grad_accum, recompute=recompute)
    traced = trace_step(model, training, plan, SEQ, stage=stage).estimate.allocated_bytes
    job = JobSpec(model=load_model(model), training=training, seq_len=SEQ, global_batch=grad_accum)
    predicted = estimate(job, plan, stage=stage).allocated_bytes
    assert predicted == pytest.approx(traced, rel=0.01)


def test_one_f_one_b_order_is_torch_schedules():
    # Schedule1F1B on stage 1 of 3 with 4 micro-batches: 2 warm-up forwards, 1B1F, then the backwards.
    assert one_f_one_b(4, 3, 1) == [("F", 0), ("F", 1), ("B", 0), ("F", 2), ("B", 1), ("F", 3), ("B", 2), ("B", 3)]
    assert one_f_one_b(2, 2, 0) == [("F", 0), ("F", 1), ("B", 0), ("B", 1)]
    assert in_flight_micro_batches(ParallelPlan(pp=4, micro_batch=1, grad_accum=8), 1) == 3

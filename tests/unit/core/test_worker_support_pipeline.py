"""The planner offers pipeline plans the worker runs: every pp plan MARP enumerates that the worker
accepts makes a valid worker configuration, and the ones it refuses say why."""

from __future__ import annotations

import pytest

from frenzy.core import catalog
from frenzy.core.hf_config import load_model
from frenzy.core.job import JobSpec
from frenzy.core.plan import ParallelPlan
from frenzy.core.worker_support import unsupported_reason
from frenzy.memory.plans import plan_job
from frenzy.train.config import WorkerConfig


def _spec(model: str) -> JobSpec:
    return JobSpec(model=load_model(model), seq_len=1024, global_batch=32)


def test_pipeline_plans_of_llama_are_offered_and_make_worker_configs():
    spec = _spec("meta-llama/Llama-3.1-8B")
    found = plan_job(spec, [catalog.gpu_type("L4")], max_gpus=16, faster=50)
    pipelined = [c.plan for c in found if c.plan.pp > 1]
    assert pipelined, "an 8B model on 24 GB cards needs stages: some pp plan is offered"
    assert all(unsupported_reason(spec, plan) is None for plan in pipelined)
    for plan in pipelined:
        WorkerConfig(job_id="j", attempt=1, model_name="m", family="llama", hf_config={}, global_batch=32,
                     dp=plan.dp, tp=plan.tp, pp=plan.pp, micro_batch=plan.micro_batch, grad_accum=plan.grad_accum)


@pytest.mark.parametrize("model,plan,reason", [
    ("gpt2", ParallelPlan(pp=2, micro_batch=1, grad_accum=4), "cannot split gpt2"),
    ("meta-llama/Llama-3.1-8B", ParallelPlan(pp=2, tp=2, micro_batch=1, grad_accum=4), "without tensor"),
    ("meta-llama/Llama-3.1-8B", ParallelPlan(pp=4, micro_batch=1, grad_accum=2), "at least 4 micro-batches"),
])
def test_pipeline_plans_the_worker_cannot_run_say_why(model, plan, reason):
    assert reason in unsupported_reason(_spec(model), plan)


def test_a_worker_config_refuses_fewer_micro_batches_than_stages():
    with pytest.raises(ValueError, match="at least 4 micro-batches"):
        WorkerConfig(job_id="j", attempt=1, model_name="m", family="llama", hf_config={}, global_batch=4,
                     pp=4, micro_batch=2, grad_accum=2)

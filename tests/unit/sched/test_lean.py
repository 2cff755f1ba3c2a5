"""HAS spends GPU-seconds beyond a job's leanest plan only on GPUs nobody behind it in the queue needs
(frenzy.sched.lean)."""

from dataclasses import replace

from frenzy.core import catalog
from frenzy.core.hf_config import load_model
from frenzy.core.job import JobSpec
from frenzy.core.training import Precision, TrainingConfig
from frenzy.memory.plans import plan_job
from frenzy.sched import ClusterState, NodeState, Place, QueuedJob
from frenzy.sched.lean import QueueDemand, lean_by_type
from frenzy.sched.policies.has import HeterogeneityAwareScheduler
from frenzy.sched.pool import FreePool
from frenzy.sched.scaleout import with_scale_out
from frenzy.sched.shapes import step_seconds

A100 = "A100-SXM-40G"


def _job(job_id: str, submit: float = 0.0, steps: int = 50_000) -> QueuedJob:
    """A Qwen2.5-1.5B job with data-parallel scale-outs up to 8 A100s, plans fastest first (as the
    simulator ranks them for --objective time)."""
    spec = JobSpec(model=load_model("Qwen/Qwen2.5-1.5B"), training=TrainingConfig(precision=Precision.FP16_MIXED),
                   seq_len=1024, global_batch=32, steps=steps)
    plans = with_scale_out(spec, plan_job(spec, [catalog.gpu_type(A100)], max_gpus=8), {A100: 8}, 8)
    job = QueuedJob(job_id=job_id, spec=spec, plans=tuple(plans), submit_time_s=submit)
    seconds = step_seconds(job)
    return replace(job, plans=tuple(sorted(plans, key=lambda c: seconds[id(c)])))


def _idle(nodes: int = 2) -> ClusterState:
    return ClusterState(nodes=tuple(NodeState(name=f"a100-{i}", gpu_type=A100, total_gpus=4, free_gpus=4)
                                    for i in range(nodes)))


def _placed(decisions) -> list[tuple[str, int]]:
    return [(d.job_id, d.choice.num_gpus) for d in decisions if isinstance(d, Place)]


def test_the_leanest_plan_of_a_type_costs_the_fewest_gpu_seconds_and_wider_ones_cost_more():
    job = _job("a")
    seconds = step_seconds(job)
    least, fewest = lean_by_type(job.plans, seconds)[A100]
    by_width = {}
    for c in job.plans:
        by_width[c.num_gpus] = min(by_width.get(c.num_gpus, float("inf")), seconds[id(c)] * c.num_gpus)
    assert fewest == 1 and least == min(by_width.values())
    # data-parallel scale-out is below linear: every doubling costs GPU-seconds, and is faster
    widths = sorted(by_width)
    assert widths == [1, 2, 4, 8]
    assert all(by_width[w] < by_width[2 * w] for w in widths[:-1])
    assert seconds["fastest"] < seconds[id(next(c for c in job.plans if c.num_gpus == 1))]


def test_a_job_alone_takes_its_fastest_plan_but_leaves_the_gpus_the_queue_needs():
    first, second = _job("first"), _job("second", submit=1.0)
    # alone on 8 idle A100s it takes all 8 (its fastest plan: nobody else could use them)
    assert _placed(HeterogeneityAwareScheduler().schedule(_idle(), [first], now=5.0)) == [("first", 8)]
    # with a second job behind it that needs at least 1 A100, the widest plan that leaves that 1 is
    # 4 GPUs (plans come in powers of two: 8 + 1 > 8), and the second job then takes the other 4
    assert _placed(HeterogeneityAwareScheduler().schedule(_idle(), [first, second], now=5.0)) == \
        [("first", 4), ("second", 4)]
    # without the rule the first job takes all 8 and the second waits
    assert _placed(HeterogeneityAwareScheduler(lean=False).schedule(_idle(), [first, second], now=5.0)) == \
        [("first", 8)]
    # nor does it apply where the first job could never grow back into GPUs that free later (no
    # elastic resizing, or no predicted ends to resize by): it would only run longer
    for policy in (HeterogeneityAwareScheduler(elastic=False), HeterogeneityAwareScheduler(time_aware=False)):
        assert _placed(policy.schedule(_idle(), [first, second], now=5.0)) == [("first", 8)]


def test_a_plan_no_costlier_than_the_leanest_is_always_allowed():
    jobs = [_job(f"j{i}", submit=float(i)) for i in range(12)]
    pool = FreePool(_idle())
    demand = QueueDemand(jobs, lambda j: step_seconds(j)["fewest_by_type"])
    assert demand.needs == {A100: 12}  # each job's fewest GPUs there: 1
    head = jobs[0]
    demand.leave(head)
    seconds = step_seconds(head)
    lean = min(head.plans, key=lambda c: seconds[id(c)] * c.num_gpus)
    wider = [c for c in head.plans if seconds[id(c)] * c.num_gpus > seconds[id(lean)] * lean.num_gpus]
    # 11 jobs behind need 11 of the 8 free GPUs: no GPU is spare, so only the leanest plan goes
    leanest = seconds["lean_plans"]
    assert demand.allows(lean, leanest, pool)
    assert wider and not any(demand.allows(c, leanest, pool) for c in wider)
    for job in jobs[1:-3]:
        demand.leave(job)
    # 3 jobs left behind: 8 - 3 = 5 GPUs are spare, so plans of up to 5 GPUs are allowed
    assert {c.num_gpus for c in head.plans if demand.allows(c, leanest, pool)} == {1, 2, 4}

"""The control loop on fake time: plan, place, run, OOM re-plan, cancel, restart reconciliation."""

from __future__ import annotations

from pathlib import Path

import pytest

from frenzy.control.loop import ControlLoop, LoopSettings
from frenzy.control.request import JobRequest
from frenzy.control.states import AttemptOutcome, JobState
from frenzy.control.store import SqlJobStore
from frenzy.core.units import GiB
from tests.unit.control.fakes import FakeClock, InProcessExecutor, node

TINY = str(Path(__file__).resolve().parents[3] / "examples" / "tiny-llama" / "config.json")


@pytest.fixture
def env(tmp_path):
    store = SqlJobStore(f"sqlite:///{tmp_path / 'f.db'}")
    executor = InProcessExecutor([node("big-0", "A100-SXM-80G", 2, 3 * GiB),
                                  node("small-0", "A10G-24G", 4, int(1.5 * GiB))])
    clock = FakeClock()
    loop = ControlLoop(store=store, executor=executor, clock=clock,
                       settings=LoopSettings(storage_root=tmp_path / "jobs"))
    return store, executor, clock, loop


def submit(store, clock, **fields):
    request = JobRequest.from_json({"model": TINY, "global_batch": 16, "seq_len": 256, "steps": 4, **fields})
    return store.create_job(name=request.display_name(), request=request.to_json(), priority=request.priority,
                            now=clock.now())


def test_queued_job_is_planned_placed_run_and_finished(env):
    store, executor, clock, loop = env
    job = submit(store, clock)
    clock.advance(0.5)
    report = loop.step()
    assert report.placed == (job.id,)
    job = store.get_job(job.id)
    assert job.state is JobState.PLACED and job.attempts == 1 and job.placed_at - job.submitted_at == 0.5
    launch = executor.launched[0]
    # the placement sums to the plan's GPUs, all on nodes of the plan's GPU type
    gpu_type = launch.choice["gpu_type"]
    assert sum(g for _, g in launch.allocation) == launch.choice["num_gpus"]
    assert all(name.startswith("big" if gpu_type == "A100-SXM-80G" else "small") for name, _ in launch.allocation)
    assert launch.worker_config["predicted_peak_bytes"] == launch.choice["memory"]["device_bytes"]
    executor.report(launch, step=1, peak=launch.choice["memory"]["device_bytes"])
    loop.step()
    assert store.get_job(job.id).state is JobState.RUNNING
    executor.finish(launch, peak=launch.choice["memory"]["device_bytes"])
    loop.step()
    job = store.get_job(job.id)
    assert job.state is JobState.SUCCEEDED and job.finished_at is not None
    assert store.calibration()[("llama", gpu_type)] == (1.0, 1)


def test_oom_replans_with_more_headroom_then_gives_up(env):
    store, executor, clock, loop = env
    job = submit(store, clock, limits={"max_attempts": 2})
    loop.step()
    first = executor.launched[0]
    predicted = first.choice["memory"]["device_bytes"]
    capacity = first.choice["gpu_memory_bytes"]
    executor.finish(first, AttemptOutcome.OOM, peak=int(predicted * 1.4),
                    error="torch.OutOfMemoryError: emulated")
    clock.advance(1)
    loop.step()  # collects the OOM, re-plans, places attempt 2
    job = store.get_job(job.id)
    assert store.attempt(job.id, 1).outcome is AttemptOutcome.OOM
    assert job.state is JobState.PLACED and job.attempts == 2
    second = executor.launched[1]
    # the new plan leaves room for 1.4x MARP's prediction on its GPU type
    assert second.choice["memory"]["required_bytes"] * 1.4 <= 0.95 * second.choice["gpu_memory_bytes"]
    assert second.choice != first.choice
    assert store.calibration()[("llama", first.choice["gpu_type"])][0] == pytest.approx(1.4)
    assert capacity > 0
    executor.finish(second, AttemptOutcome.OOM, peak=second.choice["gpu_memory_bytes"], error="OOM again")
    loop.step()
    job = store.get_job(job.id)
    assert job.state is JobState.FAILED and "max_attempts" in job.failure_reason


def test_cancel_running_and_queued(env):
    store, executor, clock, loop = env
    running = submit(store, clock)
    loop.step()
    store.request_cancel(running.id, now=clock.now())
    loop.step()
    assert store.get_job(running.id).state is JobState.CANCELLED
    assert executor.cancelled == [(running.id, 1)]
    assert store.attempt(running.id, 1).outcome is AttemptOutcome.CANCELLED


def test_jobs_wait_for_gpus_and_priority_goes_first(env):
    store, executor, clock, loop = env
    # LoRA-free jobs pinned to the 2-GPU type with 2 GPUs each: only one fits at a time
    fields = dict(limits={"gpu_types": ["A100-SXM-80G"], "max_gpus": 2}, global_batch=64)
    first = submit(store, clock, **fields)
    loop.step()
    hold = executor.launched[0]
    assert hold.job_id == first.id
    low = submit(store, clock, **fields)
    high = submit(store, clock, priority=5, **fields)
    clock.advance(1)
    report = loop.step()
    if hold.num_workers == 2:
        assert report.placed == () and report.waiting == 2
        executor.finish(hold)
        report = loop.step()
    assert report.placed[0] == high.id
    assert store.get_job(low.id).state in (JobState.PLANNING, JobState.PLACED)


def test_restart_reconciles_lost_and_live_attempts(env, tmp_path):
    store, executor, clock, loop = env
    # pinned to different GPU types so that both are placed at once
    a = submit(store, clock, limits={"gpu_types": ["A100-SXM-80G"]})
    b = submit(store, clock, limits={"gpu_types": ["A10G-24G"]})
    loop.step()
    launches = {l.job_id: l for l in executor.launched}
    executor.alive.discard((a.id, 1))  # a's actors died with the old server; b's survived
    fresh = ControlLoop(store=SqlJobStore(store.url), executor=executor, clock=clock,
                        settings=LoopSettings(storage_root=tmp_path / "jobs"))
    assert fresh.reconcile() == [a.id]
    assert executor.adopted == [(b.id, 1)]
    assert store.attempt(a.id, 1).outcome is AttemptOutcome.LOST
    fresh.step()
    assert store.get_job(a.id).attempts == 2 and store.get_job(a.id).state is JobState.PLACED
    assert launches[b.id].job_id == b.id


def test_unplannable_job_fails_with_reason(env):
    store, executor, clock, loop = env
    job = submit(store, clock, limits={"gpu_types": ["H100-SXM-80G"]})
    loop.step()
    job = store.get_job(job.id)
    assert job.state is JobState.FAILED and "limits.gpu_types" in job.failure_reason


def test_cancel_takes_effect_within_one_step_behind_a_long_queue(env, tmp_path):
    store, executor, clock, _ = env
    # planning one job per step at most: the queue of 60 takes 60 steps to plan, a cancel one
    loop = ControlLoop(store=store, executor=executor, clock=clock,
                       settings=LoopSettings(storage_root=tmp_path / "jobs", plan_budget_s=0.0))
    queue = [submit(store, clock, seq_len=128 + 8 * (i % 6)) for i in range(60)]
    urgent = submit(store, clock, priority=9, seq_len=200)
    report = loop.step()
    assert report.planned == 1 and store.get_job(urgent.id).state is not JobState.QUEUED  # priority first
    victims = [queue[-1], queue[30], urgent]
    for job in victims:
        store.request_cancel(job.id, now=clock.now())
    clock.advance(0.5)
    report = loop.step()
    assert report.planned == 1
    for job in victims:
        job = store.get_job(job.id)
        assert job.state is JobState.CANCELLED and job.finished_at == clock.now()
    assert sum(store.get_job(j.id).state is JobState.QUEUED for j in queue) == 60 - 1 - 2


def test_identical_requests_share_one_planning(env, monkeypatch):
    store, executor, clock, loop = env
    from frenzy.control import loop as loop_module

    calls = []
    real = loop_module.plan_request
    monkeypatch.setattr(loop_module, "plan_request", lambda *a, **k: calls.append(1) or real(*a, **k))
    jobs = [submit(store, clock, limits={"gpu_types": ["A100-SXM-80G"], "max_gpus": 2}, global_batch=64)
            for _ in range(5)] + [submit(store, clock, seq_len=128)]
    loop.step()
    assert len(calls) == 2  # one per distinct request on this cluster shape
    plans = [store.get_job(j.id).plans for j in jobs]
    assert all(p == plans[0] for p in plans[:5]) and plans[5] != plans[0]


class RayHoldsGpus(InProcessExecutor):
    """An executor that, like Ray, says what it really has free: here a placement group of an
    ended attempt (or someone outside Frenzy) still holds GPUs Frenzy's bookkeeping thinks free."""

    def __init__(self, nodes, held: dict[str, int]):
        super().__init__(nodes)
        self.held = held

    def free_gpus(self):
        return {n.name: n.gpus - self.held.get(n.name, 0) for n in self._nodes}


def test_gpus_ray_still_holds_are_never_offered(tmp_path):
    from frenzy.control.service import ControlService

    store = SqlJobStore(f"sqlite:///{tmp_path / 'f.db'}")
    executor = RayHoldsGpus([node("big-0", "A100-SXM-80G", 2, 3 * GiB)], held={"big-0": 2})
    clock = FakeClock()
    loop = ControlLoop(store=store, executor=executor, clock=clock,
                       settings=LoopSettings(storage_root=tmp_path / "jobs"))
    service = ControlService(store=store, executor=executor, clock=clock, loop=loop)
    job = submit(store, clock)
    report = loop.step()
    assert report.placed == () and report.waiting == 1 and executor.launched == []
    view = service.cluster()
    assert view.by_type["A100-SXM-80G"] == {"total": 2, "used": 2, "free": 0, "held_outside": 2}
    assert view.nodes[0]["free_gpus"] == 0
    executor.held = {}  # Ray removed the group
    assert loop.step().placed == (job.id,)
    placed = executor.launched[0].num_workers
    view = service.cluster()
    assert view.by_type["A100-SXM-80G"] == {"total": 2, "used": placed, "free": 2 - placed, "held_outside": 0}


def test_each_jobs_objective_reaches_the_scheduler(env):
    # HAS spends GPU-hours only on jobs ranked by time (growth, re-queue, patience); a cost job
    # must reach it as one.
    store, executor, clock, loop = env
    seen, schedule = [], loop.policy.schedule
    loop.policy.schedule = lambda state, queue, now: seen.extend(queue) or schedule(state, queue, now)
    cheap, fast = submit(store, clock, objective="cost"), submit(store, clock)
    loop.step()
    assert {q.job_id: q.objective for q in seen} == {cheap.id: "cost", fast.id: "time"}

"""Quotas in the live control loop (fake executor, real SQLite store): a borrower is preempted when
the lender submits, resumes from its checkpoint when GPUs free, and the preemption never counts as
a failed attempt."""

from __future__ import annotations

import pytest

from frenzy.control.loop import ControlLoop, LoopSettings
from frenzy.control.outcomes import counted_attempts
from frenzy.control.request import JobRequest
from frenzy.control.states import AttemptOutcome, JobState
from frenzy.control.store import SqlJobStore
from frenzy.core.units import GiB
from tests.unit.control.fakes import FakeClock, InProcessExecutor, node
from tests.unit.control.test_loop import TINY

A100 = "A100-SXM-80G"


@pytest.fixture
def env(tmp_path):
    store = SqlJobStore(f"sqlite:///{tmp_path / 'f.db'}")
    executor = InProcessExecutor([node("big-0", A100, 2, 3 * GiB)])
    clock = FakeClock()
    loop = ControlLoop(store=store, executor=executor, clock=clock,
                       settings=LoopSettings(storage_root=tmp_path / "jobs"))
    store.set_team("lender", {A100: 1}, now=clock.now())
    store.set_team("borrower", {"a100-80g": 1}, now=clock.now())  # an alias: stored under its canonical name
    store.add_team_member("lender", "lena", now=clock.now())
    store.add_team_member("borrower", "bob", now=clock.now())
    return store, executor, clock, loop


def submit(store, clock, owner, **fields):
    request = JobRequest.from_json({"model": TINY, "global_batch": 16, "seq_len": 256, "steps": 4,
                                    "limits": {"max_attempts": 1}, **fields})
    return store.create_job(name=request.display_name(), request=request.to_json(), priority=request.priority,
                            now=clock.now(), owner=owner)


def test_a_borrower_is_preempted_for_the_lender_and_resumes_later(env):
    store, executor, clock, loop = env
    assert store.team("borrower").quota == {A100: 1}
    first, second = submit(store, clock, "bob"), submit(store, clock, "bob")
    loop.step()
    # bob's team has 1 GPU; the lender's idle one is borrowed: both run, one GPU each.
    assert {store.get_job(j.id).state for j in (first, second)} == {JobState.PLACED}
    assert [sum(g for _, g in launch.allocation) for launch in executor.launched] == [1, 1]
    clock.advance(10)
    lender_job = submit(store, clock, "lena")
    loop.step()
    # The lender's job is within its quota: a borrower is stopped (the latest started; same start,
    # so the lower id) and the lender's job takes its GPU in the same step.
    victim = min(first.id, second.id)
    assert executor.cancelled == [(victim, 1)]
    assert store.attempt(victim, 1).outcome is AttemptOutcome.PREEMPTED
    assert store.get_job(victim).state is JobState.PLANNING
    assert store.get_job(lender_job.id).state is JobState.PLACED
    assert any("preempted" in line for _, _, line in store.logs(victim))
    clock.advance(10)
    loop.step()  # no GPU is free: the victim waits
    assert store.get_job(victim).state is JobState.PLANNING
    lender_launch = next(launch for launch in executor.launched if launch.job_id == lender_job.id)
    executor.finish(lender_launch)
    clock.advance(10)
    loop.step()
    resumed = store.get_job(victim)
    assert resumed.state is JobState.PLACED and resumed.attempts == 2
    relaunch = executor.launched[-1]
    assert (relaunch.job_id, relaunch.attempt) == (victim, 2)
    first_launch = next(launch for launch in executor.launched if launch.job_id == victim)
    # the same checkpoint folder: the second attempt resumes where the first saved
    assert relaunch.worker_config["storage_path"] == first_launch.worker_config["storage_path"]
    # max_attempts is 1, yet the job runs again: a preemption is not a failed attempt
    assert counted_attempts(store, resumed) == 1
    assert loop.counters.preemptions == 1 and loop.counters.failed == 0


def test_without_teams_nothing_is_preempted(env, tmp_path):
    store, executor, clock, _ = env
    plain = SqlJobStore(f"sqlite:///{tmp_path / 'plain.db'}")
    loop = ControlLoop(store=plain, executor=executor, clock=clock,
                       settings=LoopSettings(storage_root=tmp_path / "jobs2"))
    submit(plain, clock, "bob"), submit(plain, clock, "bob")
    loop.step()
    submit(plain, clock, "lena")
    loop.step()
    assert executor.cancelled == [] and loop.counters.preemptions == 0

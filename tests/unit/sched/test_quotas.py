"""Teams and GPU quotas around HAS, on hand-built states whose answers are worked out by hand.

Every job here has exactly one plan (n GPUs of one type), and running jobs carry no expected end,
so the wrapped policy is plain greedy HAS: what the quota layer adds is all that differs."""

from dataclasses import replace

import pytest

from frenzy.core import catalog
from frenzy.core.hf_config import load_model
from frenzy.core.job import JobSpec
from frenzy.core.training import Precision, TrainingConfig
from frenzy.memory.plans import plan_job
from frenzy.sched import ClusterState, NodeState, Place, Preempt, QueuedJob, RunningJob, get_policy
from frenzy.sched.quotas import DEFAULT_TEAM, QuotaScheduler, Teams, fair_share

A100 = "A100-SXM-40G"
SPEC = JobSpec(model=load_model("EleutherAI/pythia-160m"), training=TrainingConfig(precision=Precision.FP16_MIXED),
               seq_len=512, global_batch=64, steps=1000)
PLANS = plan_job(SPEC, [catalog.gpu_type(A100)], max_gpus=8, faster=100)


def _plan(gpus: int):
    """The 1-GPU plan run data parallel on `gpus` GPUs (MARP stops listing counts at twice the
    smallest that fits; the quota layer reads only the type and the count)."""
    one = next(c for c in PLANS if c.num_gpus == 1)
    return replace(one, plan=replace(one.plan, dp=gpus, grad_accum=1, micro_batch=SPEC.global_batch // gpus))


def _job(job_id: str, gpus: int, submit: float = 0.0, steps: int = 1000) -> QueuedJob:
    return QueuedJob(job_id=job_id, spec=replace(SPEC, steps=steps), plans=(_plan(gpus),), submit_time_s=submit)


def _run(job_id: str, allocation, started: float) -> RunningJob:
    return RunningJob(job_id=job_id, choice=_plan(sum(g for _, g in allocation)), allocation=tuple(allocation),
                      start_time_s=started)


def _state(nodes: int, running=()) -> ClusterState:
    used: dict[str, int] = {}
    for r in running:
        for name, gpus in r.allocation:
            used[name] = used.get(name, 0) + gpus
    return ClusterState(nodes=tuple(NodeState(name=f"n{i}", gpu_type=A100, total_gpus=4,
                                              free_gpus=4 - used.get(f"n{i}", 0)) for i in range(nodes)),
                        running=tuple(running))


def _teams(quotas, members) -> Teams:
    """`members`: team -> job id prefixes (a job's team is that of the prefix its id starts with)."""
    return Teams(quotas={t: {A100: n} for t, n in quotas.items()}, team_of=members)


def _schedule(teams, state, queue, now=100.0):
    return QuotaScheduler(get_policy("frenzy"), teams).schedule(state, queue, now)


def _placed(decisions):
    return [d.job_id for d in decisions if isinstance(d, Place)]


def _preempted(decisions):
    return [d.job_id for d in decisions if isinstance(d, Preempt)]


def test_jobs_within_quota_are_admitted_before_a_team_that_would_borrow():
    # 8 GPUs, A and B 4 each. a1 is the longest job: plain HAS (least work first) places B's two.
    queue = [_job("b1", 4, 0), _job("b2", 4, 1), _job("a1", 4, 2, steps=5000)]
    assert _placed(get_policy("frenzy").schedule(_state(2), queue, 100.0)) == ["b1", "b2"]
    teams = _teams({"A": 4, "B": 4}, {"a1": "A", "b1": "B", "b2": "B"})
    # With quotas: a1 and one of B's jobs are within their quotas; B's other would borrow A's 4,
    # which a1 claims.
    placed = _placed(_schedule(teams, _state(2), queue))
    assert "a1" in placed and len(placed) == 2


def test_idle_quota_is_borrowed():
    teams = _teams({"A": 4, "B": 4}, {"b1": "B", "b2": "B"})
    decisions = _schedule(teams, _state(2), [_job("b1", 4, 0), _job("b2", 4, 1)])
    assert sorted(_placed(decisions)) == ["b1", "b2"] and not _preempted(decisions)


def test_the_lender_reclaims_from_the_latest_started_borrower():
    # B holds all 8 GPUs (4 nominal + 4 borrowed from A); b2 started last, so b2 is the borrower evicted.
    running = [_run("b1", [("n0", 4)], 10.0), _run("b2", [("n1", 4)], 20.0)]
    teams = _teams({"A": 4, "B": 4}, {"a1": "A", "b1": "B", "b2": "B"})
    decisions = _schedule(teams, _state(2, running), [_job("a1", 4, 50.0)])
    assert _preempted(decisions) == ["b2"] and _placed(decisions) == ["a1"]
    place = next(d for d in decisions if isinstance(d, Place))
    assert place.allocation == (("n1", 4),)


def test_a_team_at_its_nominal_quota_is_not_a_victim():
    # B runs within its 4; the default pool (no team) borrows A's 4 and is evicted even though it started first.
    running = [_run("d1", [("n1", 4)], 5.0), _run("b1", [("n0", 4)], 10.0)]
    teams = _teams({"A": 4, "B": 4}, {"a1": "A", "b1": "B"})
    decisions = _schedule(teams, _state(2, running), [_job("a1", 4, 50.0)])
    assert _preempted(decisions) == ["d1"] and _placed(decisions) == ["a1"]


def test_no_borrower_is_evicted_when_that_cannot_make_room():
    # A's 8-GPU job is beyond its nominal 4: it can only borrow, never reclaim.
    running = [_run("b1", [("n0", 4)], 10.0), _run("b2", [("n1", 4)], 20.0)]
    teams = _teams({"A": 4, "B": 4}, {"a1": "A", "b1": "B", "b2": "B"})
    assert _schedule(teams, _state(2, running), [_job("a1", 8, 50.0)]) == []


def test_fair_share_is_the_dominant_borrowed_share_over_the_quota():
    # 12 GPUs; A nominal 2 uses 3, B nominal 4 uses 5: each borrows 1 GPU of 12.
    teams = _teams({"A": 2, "B": 4, "C": 6}, {})
    capacity = {A100: 12}
    assert fair_share("A", {A100: 3}, teams, capacity) == pytest.approx((1 / 12) / (2 / 12))  # 0.5
    assert fair_share("B", {A100: 5}, teams, capacity) == pytest.approx((1 / 12) / (4 / 12))  # 0.25
    assert fair_share("C", {A100: 6}, teams, capacity) == 0.0
    assert fair_share(DEFAULT_TEAM, {A100: 1}, teams, capacity) == float("inf")
    assert fair_share(DEFAULT_TEAM, {}, teams, capacity) == 0.0


def test_the_one_lendable_gpu_goes_to_the_team_with_the_smaller_weighted_share():
    # C (nominal 6) runs 3 and waits for nothing: 1 GPU is free and lendable. A's share 0.5, B's 0.25
    # (above); by borrowed GPUs alone they would tie (1 each) and A would win on its name.
    running = ([_run(f"a{i}", [("n0", 1)], 1.0) for i in range(3)] +
               [_run(f"b{i}", [("n1", 1)], 1.0) for i in range(4)] + [_run("b4", [("n2", 1)], 1.0)] +
               [_run(f"c{i}", [("n2", 1)], 1.0) for i in range(2)] + [_run("c2", [("n0", 1)], 1.0)])
    members = {**{f"a{i}": "A" for i in range(3)}, **{f"b{i}": "B" for i in range(5)},
               **{f"c{i}": "C" for i in range(3)}, "a-new": "A", "b-new": "B"}
    teams = _teams({"A": 2, "B": 4, "C": 6}, members)
    state = _state(3, running)
    assert sum(n.free_gpus for n in state.nodes) == 1
    decisions = _schedule(teams, state, [_job("a-new", 1, 0.0), _job("b-new", 1, 5.0)])
    assert _placed(decisions) == ["b-new"]


def test_users_in_no_team_borrow_last():
    # 4 GPUs, nobody running, d1 in no team: one of A's jobs is within A's 2; d1 and A's other job
    # both borrow B's idle 2, and A's (share 0, a team) goes before the default pool (share 0).
    queue = [_job("d1", 2, 0.0), _job("a1", 2, 1.0), _job("a2", 2, 2.0)]
    teams = _teams({"A": 2, "B": 2}, {"a1": "A", "a2": "A"})
    decisions = _schedule(teams, _state(1), queue)
    assert sorted(_placed(decisions)) == ["a1", "a2"]


def test_quotas_are_whole_numbers_and_the_default_pool_has_none():
    with pytest.raises(ValueError, match="whole number >= 0"):
        Teams(quotas={"A": {A100: -1}})
    with pytest.raises(ValueError, match="whole number >= 0"):
        Teams(quotas={"A": {A100: True}})
    with pytest.raises(ValueError, match="default pool"):
        Teams(quotas={DEFAULT_TEAM: {A100: 1}})

"""The scheduler's readings kept across calls (free GPUs, release schedule, running jobs' step times)
must equal what a reading from scratch gives, whatever sequence of states the calls see."""

import random
from dataclasses import replace

import pytest

from frenzy.core import catalog
from frenzy.core.hf_config import load_model
from frenzy.core.job import JobSpec
from frenzy.core.training import Precision, TrainingConfig
from frenzy.memory.plans import plan_job
from frenzy.sched import ClusterState, NodeState, QueuedJob, RunningJob
from frenzy.sched.pool import FreePool
from frenzy.sched.profile import Releases, releases_of
from frenzy.sched.runfacts import RunFacts
from frenzy.sched.shapes import plan_options, step_seconds
from frenzy.sched.types import RunningChanges

TYPES = ("T4-16G", "A100-SXM-40G")


def _job(job_id: str) -> QueuedJob:
    spec = JobSpec(model=load_model("EleutherAI/pythia-160m"), training=TrainingConfig(precision=Precision.FP16_MIXED),
                   seq_len=512, global_batch=8, steps=1000)
    plans = tuple(plan_job(spec, [catalog.gpu_type(t) for t in TYPES], max_gpus=8))
    return QueuedJob(job_id=job_id, spec=spec, plans=plans, submit_time_s=0.0)


def test_free_pool_follows_nodes_that_change_between_calls():
    nodes = [NodeState(name=f"n{i}", gpu_type=TYPES[i % 2], total_gpus=4, free_gpus=4) for i in range(6)]
    FreePool(ClusterState(nodes=tuple(nodes)))
    nodes[2] = nodes[2].with_free(1)  # 3 of n2's T4s taken (n0, n2, n4 are T4 nodes)
    nodes[3] = nodes[3].with_free(0)
    pool = FreePool(ClusterState(nodes=tuple(nodes)))
    assert pool.free == {"T4-16G": {"n0": 4, "n2": 1, "n4": 4}, "A100-SXM-40G": {"n1": 4, "n3": 0, "n5": 4}}
    assert pool.totals == {"T4-16G": 9, "A100-SXM-40G": 8}
    pool.take("T4-16G", (("n0", 4),))  # a call's scratch changes stay in its own pool
    assert FreePool(ClusterState(nodes=tuple(nodes))).totals == {"T4-16G": 9, "A100-SXM-40G": 8}
    # Another cluster (a node of another size) is read afresh, not patched.
    other = (NodeState(name="n0", gpu_type="T4-16G", total_gpus=8, free_gpus=8),)
    pool = FreePool(ClusterState(nodes=other))
    assert (pool.totals, pool.capacity, pool.widest) == ({"T4-16G": 8}, {"T4-16G": 8}, {"T4-16G": 8})


def test_free_pools_made_from_one_reading_each_see_only_their_own_changes():
    # Pools share a reading's free GPUs per node until they change them; a wrapping policy may make
    # one pool from the cluster and another from a narrower view of it within the same call.
    nodes = [NodeState(name=f"n{i}", gpu_type=TYPES[i % 2], total_gpus=4, free_gpus=4) for i in range(4)]
    outer = FreePool(ClusterState(nodes=tuple(nodes)))
    inner = FreePool(ClusterState(nodes=tuple(nodes)))
    inner.take("T4-16G", (("n0", 3),))
    outer.give("A100-SXM-40G", (("n1", 0),))
    assert outer.free["T4-16G"] == {"n0": 4, "n2": 4} and inner.free["T4-16G"] == {"n0": 1, "n2": 4}
    narrower = [nodes[0].with_free(2)] + nodes[1:]  # the same nodes, other free counts: a patched reading
    assert FreePool(ClusterState(nodes=tuple(narrower))).free["T4-16G"] == {"n0": 2, "n2": 4}
    assert outer.free["T4-16G"] == {"n0": 4, "n2": 4} and outer.totals["T4-16G"] == 8
    assert outer.find("T4-16G", 4, 1) in ((("n0", 4),), (("n2", 4),))
    assert FreePool(ClusterState(nodes=tuple(nodes))).free["T4-16G"] == {"n0": 4, "n2": 4}


def _as_lists(releases: Releases) -> tuple:
    return releases.ends, releases.gpus, releases.allocations  # dicts: equal whatever the order of types


@pytest.mark.parametrize("told", [False, True], ids=["compared", "told-what-changed"])
def test_release_schedule_kept_across_calls_equals_one_built_from_scratch(told):
    rng = random.Random(7)
    job = _job("q")
    nodes = tuple(NodeState(name=f"n{i}", gpu_type=TYPES[i % 2], total_gpus=8, free_gpus=8) for i in range(4))
    running: list[RunningJob] = []
    previous: tuple = ()
    for step in range(300):
        started, stopped = [], []
        if running and rng.random() < 0.45:
            stopped.append(running.pop(rng.randrange(len(running))))
        for _ in range(rng.choice((1, 1, 2, 6))):
            choice = rng.choice(job.plans)
            node = next(n.name for n in nodes if n.gpu_type == choice.gpu.name)
            end = rng.choice((None, 100.0, 200.0, float(rng.randrange(1000))))  # ties on purpose
            running.append(RunningJob(job_id=f"r{step}", choice=choice, allocation=((node, choice.num_gpus),),
                                      start_time_s=0.0, expected_end_s=end, job=job))
            started.append(running[-1])
        if rng.random() < 0.2:  # one that started and stopped again between two calls
            started.append(running.pop())
            stopped.append(started[-1])
        changes = RunningChanges(previous=previous, started=tuple(started), stopped=tuple(stopped)) if told else None
        state = ClusterState(nodes=nodes, running=tuple(running), changes=changes)
        previous = state.running
        kept = releases_of(state)
        assert _as_lists(kept) == _as_lists(Releases(state))
        assert all(ends == sorted(ends) for ends in kept.ends.values())


def test_run_facts_are_each_running_jobs_step_times():
    job = _job("q")
    seconds = step_seconds(job)
    a, b = job.plans[0], job.plans[-1]
    runs = [RunningJob(job_id="a", choice=a, allocation=(("n0", a.num_gpus),), start_time_s=0.0,
                       expected_end_s=50.0, job=job),
            RunningJob(job_id="b", choice=b, allocation=(("n1", b.num_gpus),), start_time_s=0.0,
                       expected_end_s=None, job=job),  # no expected end: nothing to read
            RunningJob(job_id="c", choice=b, allocation=(("n1", b.num_gpus),), start_time_s=0.0,
                       expected_end_s=80.0, job=None)]  # no queued job: nothing to read
    kept = RunFacts(step_seconds, plan_options)
    facts = kept.read(ClusterState(nodes=(), running=tuple(runs)))
    fastest = min(seconds[id(c)] for c in job.plans)
    assert [(f.run.job_id, f.step_s, f.fastest_s) for f in facts] == [("a", seconds[id(a)], fastest)]
    runs[1] = RunningJob(job_id="b", choice=b, allocation=(("n1", b.num_gpus),), start_time_s=0.0,
                         expected_end_s=90.0, job=job)  # restarted with an expected end
    facts = kept.read(ClusterState(nodes=(), running=tuple(runs)))
    assert [(f.run.job_id, f.step_s) for f in facts] == [("a", seconds[id(a)]), ("b", seconds[id(b)])]


def test_free_pool_of_nodes_sharing_a_name_reads_as_from_scratch():
    # One free count per name, the last node's (as a reading from scratch gives); totals count both.
    nodes = [NodeState(name="dup", gpu_type="T4-16G", total_gpus=4, free_gpus=4) for _ in range(2)]
    FreePool(ClusterState(nodes=tuple(nodes)))
    nodes[0] = nodes[0].with_free(1)
    pool = FreePool(ClusterState(nodes=tuple(nodes)))
    assert pool.free == {"T4-16G": {"dup": 4}} and pool.totals == {"T4-16G": 5}


def test_a_job_queued_again_with_its_steps_left_is_the_job_as_replace_makes_it():
    from dataclasses import MISSING, fields, replace
    job = _job("q")
    # every field away from its default, so a field with_steps forgot to copy would show
    job = replace(job, requested_gpus=4, requested_gpu_type="T4-16G", attempts=2, priority=3,
                  excluded_gpu_types=("A100-SXM-40G",), objective="cost", metadata={"user": "u"})
    for record in (job, job.spec):
        for f in fields(record):
            default = f.default_factory() if f.default_factory is not MISSING else f.default
            assert not f.init or getattr(record, f.name) != default, f"set {f.name} away from its default here"
    again, expected = job.with_steps(77), replace(job, spec=replace(job.spec, steps=77))
    for f in fields(QueuedJob):
        assert getattr(again, f.name) == getattr(expected, f.name), f.name
    for f in fields(JobSpec):
        assert getattr(again.spec, f.name) == getattr(expected.spec, f.name), f.name
    assert again == expected and hash(again.spec) == hash(expected.spec)


@pytest.mark.parametrize("told", [False, True, "wrongly"], ids=["compared", "told-what-changed", "told-wrongly"])
def test_run_facts_kept_across_calls_equal_ones_read_from_scratch(told):
    rng = random.Random(11)
    job, cost_job = _job("q"), replace(_job("c"), objective="cost")
    kept = RunFacts(step_seconds, plan_options)
    running: list[RunningJob] = []
    previous: tuple = ()
    for step in range(300):
        started, stopped = [], []
        for _ in range(rng.choice((0, 1, 2))):
            if running:
                stopped.append(running.pop(rng.randrange(len(running))))
        for k in range(rng.choice((0, 1, 1, 3))):
            queued = rng.choice((job, job, cost_job))
            choice = rng.choice(queued.plans)
            end = rng.choice((None, 500.0, float(rng.randrange(1000))))
            running.append(RunningJob(job_id=f"r{step}.{k}", choice=choice, allocation=(("n0", choice.num_gpus),),
                                      start_time_s=0.0, expected_end_s=end, job=queued))
            started.append(running[-1])
        if told == "wrongly" and stopped and rng.random() < 0.5:
            stopped.pop()  # a caller whose changes do not add up: read from scratch, not patched
        changes = None if not told else RunningChanges(previous=previous, started=tuple(started),
                                                       stopped=tuple(stopped))
        state = ClusterState(nodes=(), running=tuple(running), changes=changes)
        previous = state.running
        fresh = RunFacts(step_seconds, plan_options)
        facts, expected = kept.read(state), fresh.read(state)
        assert [(f.run, f.step_s, f.fastest_s, f.options, f.gpu, f.buys_time) for f in facts] == \
            [(f.run, f.step_s, f.fastest_s, f.options, f.gpu, f.buys_time) for f in expected]
        assert [f.run.job_id for f in facts] == [r.job_id for r in running if r.expected_end_s is not None]
        cost = kept.subset(state, "cost", lambda f: not f.buys_time, now=float(step))
        assert [f.run for f in cost] == [f.run for f in facts if not f.buys_time]


def test_preemption_room_search_frees_what_trying_best_fit_after_every_victim_frees():
    # Independent reference: evict victims in order and try best fit after each, as a search
    # without the widest-node shortcut would; the kept search must find the same room.
    from frenzy.sched.placement import best_fit
    from frenzy.sched.preemption import _room
    rng = random.Random(5)
    job = _job("q")
    choice = job.plans[0]
    for _ in range(2000):
        names = [f"n{i}" for i in range(rng.randrange(1, 7))]
        nodes = tuple(NodeState(name=n, gpu_type=TYPES[0], total_gpus=8, free_gpus=rng.randrange(0, 3)) for n in names)
        victims = [RunningJob(job_id=f"v{k}", choice=choice, start_time_s=0.0, expected_end_s=1e6, job=job,
                              allocation=((rng.choice(names), rng.choice((1, 2, 3))),)) for k in range(rng.randrange(0, 10))]
        need, group, span = rng.choice((1, 2, 4, 8)), rng.choice((1, 2)), rng.choice((1, 1, 2))
        if any(v.allocation[0][1] + n.free_gpus > 8 for v in victims for n in nodes if n.name == v.allocation[0][0]):
            continue
        pool = FreePool(ClusterState(nodes=nodes))
        free, expected = dict(pool.free[TYPES[0]]), (None, [])
        for count, victim in enumerate(victims, 1):
            for name, gpus in victim.allocation:
                free[name] += gpus
            found = best_fit(free, need, group)
            if found is not None and len(found) <= span:
                expected = (found, victims[:count])
                break
        assert _room(pool, TYPES[0], need, group, span, victims) == expected

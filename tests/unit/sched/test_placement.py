"""Best-fit placement: tensor-parallel groups stay inside nodes, fewest nodes, least leftover."""

from frenzy.sched.placement import best_fit, place_on_nodes
from frenzy.sched.types import NodeState


def test_single_node_best_fit_takes_the_tightest_node():
    assert best_fit({"a": 8, "b": 4, "c": 6}, 4, 1) == (("b", 4),)


def test_spanning_uses_fewest_nodes_and_whole_tp_groups():
    free = {"a": 3, "b": 8, "c": 5}
    allocation = best_fit(free, 12, 2)
    assert sum(n for _, n in allocation) == 12
    assert all(n % 2 == 0 and n <= free[name] for name, n in allocation)
    assert len(allocation) == 2  # 8 + 4, not three nodes


def test_cannot_fit_returns_none():
    assert best_fit({"a": 3, "b": 3}, 4, 4) is None  # 6 free GPUs but no node holds a TP group of 4
    assert best_fit({"a": 2}, 4, 1) is None


def test_place_on_nodes_wraps_node_states():
    nodes = [NodeState(name="n0", gpu_type="T4-16G", total_gpus=4, free_gpus=2),
             NodeState(name="n1", gpu_type="T4-16G", total_gpus=4, free_gpus=4)]
    assert place_on_nodes(nodes, 4, 4) == (("n1", 4),)


def test_scale_out_keeps_the_global_batch_and_shrinks_the_micro_batch_last():
    from frenzy.core import catalog
    from frenzy.core.plan import ParallelPlan
    from frenzy.memory.plans import PlanChoice
    from frenzy.sched.scaleout import scaled_plan

    def choice(**kw):
        return PlanChoice(gpu=catalog.gpu_type("A100-SXM-40G"), plan=ParallelPlan(**kw), memory=None, usable_bytes=0)

    base = choice(dp=1, micro_batch=2, grad_accum=4)  # 8 samples per step
    for factor, (micro, accum) in {2: (2, 2), 4: (2, 1), 8: (1, 1)}.items():
        plan = scaled_plan(base, factor)
        assert (plan.dp, plan.micro_batch, plan.grad_accum) == (factor, micro, accum)
        assert plan.dp * plan.micro_batch * plan.grad_accum == 8
    assert scaled_plan(base, 16) is None  # 8 samples cannot feed 16 ranks
    # A pipeline needs at least as many micro-batches per step as stages.
    assert scaled_plan(choice(dp=1, pp=2, micro_batch=1, grad_accum=4), 4) is None

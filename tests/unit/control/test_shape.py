"""The live cluster's shape as the planner sees it: GPU types, node sizes and their network."""

from dataclasses import replace

from frenzy.control.planner import ClusterShape, plan_request
from frenzy.control.ports import NodeInfo
from frenzy.control.request import JobRequest
from frenzy.core import catalog
from frenzy.perf import step_time

A100 = "A100-SXM-40G"


def _node(name: str, gpus: int, gbit_s: float) -> NodeInfo:
    gpu = replace(catalog.gpu_type(A100), inter_node_bandwidth_bytes_s=gbit_s * 1e9 / 8)
    return NodeInfo(name=name, gpu_type=gpu, gpus=gpus)


def test_a_type_is_planned_on_its_slowest_link_and_a_network_change_replans():
    shape = ClusterShape.from_nodes([_node("a", 4, 100), _node("b", 2, 25)])
    assert shape.types[A100].inter_node_bandwidth_bytes_s == 25e9 / 8
    assert shape.types[A100].gpus_per_node == 4 and shape.total[A100] == 6
    faster = ClusterShape.from_nodes([_node("a", 4, 100), _node("b", 2, 100)])
    assert faster.signature() != shape.signature()  # the control loop re-plans its jobs when this changes


def test_plans_spanning_nodes_are_predicted_on_the_clusters_network():
    request = JobRequest(model="Qwen/Qwen2.5-7B", global_batch=64, seq_len=1024, steps=100)
    spec = request.job_spec()
    slow = ClusterShape.from_nodes([_node(f"n{i}", 4, 1) for i in range(4)])
    fast = ClusterShape.from_nodes([_node(f"n{i}", 4, 400) for i in range(4)])
    slow_plans, fast_plans = plan_request(request, spec, slow), plan_request(request, spec, fast)
    assert all(c.gpu.inter_node_bandwidth_bytes_s == 1e9 / 8 for c in slow_plans)
    # On 1 Gb/s the gradient all-reduce of a 7B model makes every plan wider than a node of 4 slower
    # than the best one-node plan, so the best plan stays on one node; on 400 Gb/s it spans two.
    one_node = min(step_time(spec, c.plan, c.gpu).total_s for c in slow_plans if c.num_gpus <= 4)
    assert all(step_time(spec, c.plan, c.gpu).total_s > one_node for c in slow_plans if c.num_gpus > 4)
    assert slow_plans[0].num_gpus <= 4 < fast_plans[0].num_gpus

"""One planner: `frenzy plan`, `GET /v1/plans`, the control loop and the simulator offer the same
plans for the same request on the same cluster (memory.plans.plan_job behind all four)."""

import json

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from frenzy.cli.main import app as cli_app
from frenzy.control.api import create_app
from frenzy.control.inputs import InputPolicy
from frenzy.control.loop import ControlLoop, LoopSettings
from frenzy.control.planner import ClusterShape
from frenzy.control.request import JobRequest
from frenzy.control.service import ControlService
from frenzy.control.store import SqlJobStore
from frenzy.sched.registry import get_policy
from frenzy.sim.cluster import ClusterSpec, NodeGroup
from frenzy.sim.engine import SimConfig, Simulator
from tests.unit.control.fakes import FakeClock, InProcessExecutor, node

MODEL, BATCH, SEQ, STEPS = "meta-llama/Llama-3.1-8B", 32, 2048, 10
# 16 GPUs of each type, on nodes as wide as the catalog's: the CLI's --max-gpus 16 is the same cluster
GROUPS = (("A100-SXM-80G", 8, 2), ("A10G-24G", 4, 4), ("L40S-48G", 8, 2))


def _key(row: dict) -> tuple:
    return (row["gpu_type"], row["dp"], row["tp"], row["pp"], row["zero"], row["micro_batch"], row["grad_accum"],
            row["recompute"], row["sequence_parallel"], row["mixed_precision"], row["memory"]["required_bytes"])


def test_cli_api_loop_and_simulator_offer_the_same_plans(tmp_path):
    cli = CliRunner().invoke(cli_app, ["plan", MODEL, "--gpus", ",".join(g for g, _, _ in GROUPS), "--max-gpus", "16",
                                       "--global-batch", str(BATCH), "--seq", str(SEQ), "--steps", str(STEPS),
                                       "--json"])
    assert cli.exit_code == 0, cli.output
    from_cli = [_key(p) for p in json.loads(cli.stdout)["plans"]]

    nodes = [node(f"{gpu}-{i}", gpu, width) for gpu, width, count in GROUPS for i in range(count)]
    store, executor, clock = SqlJobStore(f"sqlite:///{tmp_path / 'f.db'}"), InProcessExecutor(nodes), FakeClock()
    loop = ControlLoop(store=store, executor=executor, clock=clock, settings=LoopSettings(storage_root=tmp_path))
    service = ControlService(store=store, executor=executor, clock=clock, loop=loop, inputs=InputPolicy())
    client = TestClient(create_app(service), base_url="http://127.0.0.1")
    api = client.get("/v1/plans", params=dict(model=MODEL, global_batch=BATCH, seq_len=SEQ, steps=STEPS))
    assert api.status_code == 200, api.text
    from_api = [_key(p) for p in api.json()["plans"]]

    request = JobRequest(model=MODEL, global_batch=BATCH, seq_len=SEQ, steps=STEPS)
    spec, shape = request.job_spec(), ClusterShape.from_nodes(nodes)
    from_loop = [_key(c.to_json()) for c in loop.choices(request, spec, shape, shape.signature(), 1.0, {})]

    cluster = ClusterSpec(name="same", groups=tuple(NodeGroup(gpu_type=g, gpus_per_node=w, count=n)
                                                    for g, w, n in GROUPS))
    sim = Simulator(cluster, get_policy("frenzy"), [], SimConfig())
    from_sim = [_key(c.to_json()) for c in sim.offered_plans(spec)]

    assert from_cli and {row[0] for row in from_cli} == {g for g, _, _ in GROUPS}
    assert from_api == from_cli and from_loop == from_cli  # the same plans in the same (time) order
    assert set(from_sim) == set(from_cli)  # the simulator ranks one-step jobs: the same set


def test_the_simulator_plans_with_the_live_margin_which_covers_its_error_bound():
    from frenzy.memory.fit import DEFAULT_SAFETY_MARGIN
    from frenzy.sim import truth

    # a true peak of up to prediction x (1 + bound) stays within the GPU: (1 - m)(1 + bound) <= 1
    assert SimConfig().safety_margin == DEFAULT_SAFETY_MARGIN
    assert (1 - DEFAULT_SAFETY_MARGIN) * (1 + truth.MARP_ERROR_BOUND) <= 1

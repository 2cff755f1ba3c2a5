"""Plans beyond data parallelism on real Ray (the fake cluster of conftest), through the executor the
control loop uses: pipeline stages, tensor + sequence parallelism and LoRA under tensor parallelism
each train on two workers with the loss going down, and each job's second attempt resumes the first
one's checkpoint on a different plan (what a re-plan does)."""

from __future__ import annotations

import json
import time

import pytest

from frenzy.control.ports import Finished, Launch, Progress
from frenzy.control.states import AttemptOutcome
from frenzy.train.config import WorkerConfig
from tests.e2e.test_serverless import TINY
from tests.unit.train.dist_helpers import write_short_chats

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
NODE, GPU = "a100-sxm-80g-0", "A100-SXM-80G"  # two fake GPUs of 6 GiB


def _config(storage, job_id: str, attempt: int, steps: int, **plan) -> WorkerConfig:
    chat = write_short_chats(storage)
    data = {"path": chat, "format": "chat", "validation": 0.2, "overlong": "truncate", "seed": 0}
    fields = dict(job_id=job_id, attempt=attempt, model_name="tiny-llama", family="llama",
                  hf_config=json.loads(open(TINY).read()), dataset=chat, data=data, seq_len=64,
                  global_batch=8, steps=steps, learning_rate=3e-3, precision="fp32", checkpoint_every=3,
                  storage_path=str(storage / job_id), gpu_type=GPU, gpu_memory_bytes=6 * 2**30,
                  predicted_peak_bytes=2**30, fake_gpu=True, request={"seq_len": 64, "precision": "fp32"})
    fields.update(plan)
    return WorkerConfig(**fields)


def _run(executor, cfg: WorkerConfig, timeout_s: float = 400) -> list[dict]:
    """Run one attempt to its end; its per-step metrics, in step order."""
    launch = Launch(job_id=cfg.job_id, attempt=cfg.attempt, choice={"gpu_type": GPU},
                    allocation=((NODE, cfg.world_size),), worker_config=cfg.to_json())
    assert executor.check_feasible(launch) is None
    executor.submit(launch)
    steps: dict[int, dict] = {}
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        for event in executor.poll():
            if isinstance(event, Progress):
                steps[event.step] = event.metrics
            elif isinstance(event, Finished):
                assert event.outcome is AttemptOutcome.SUCCEEDED, event.error
                return [dict(steps[s], step=s) for s in sorted(steps)]
        time.sleep(0.5)
    executor.cancel(cfg.job_id, cfg.attempt)
    raise AssertionError(f"{cfg.job_id} attempt {cfg.attempt} did not finish in {timeout_s} s")


@pytest.fixture
def executor(ray_cluster, tmp_path):
    import ray

    from frenzy.executor.ray_executor import RayExecutor

    executor = RayExecutor(address=ray_cluster[0].address, storage_root=tmp_path, fake_cluster=True)
    yield executor
    executor.shutdown()
    ray.shutdown()


PIPELINE = dict(pp=2, micro_batch=2, grad_accum=4)
TP_SP = dict(tp=2, sequence_parallel=True, micro_batch=4, grad_accum=2)
LORA = dict(method="lora")  # on q and v, the default targets


@pytest.mark.parametrize("job,first,second", [("j-pp-then-tp", PIPELINE, TP_SP),
                                              ("j-lora-tp-then-pp", dict(TP_SP, **LORA), dict(PIPELINE, **LORA))])
def test_a_plan_trains_and_its_checkpoint_resumes_on_another(executor, tmp_path, job, first, second):
    reports = _run(executor, _config(tmp_path, job, 1, steps=3, **first))
    losses = [r["loss"] for r in reports]
    assert [r["step"] for r in reports] == [1, 2, 3]
    assert losses[0] > losses[1] > losses[2], losses
    resumed = _run(executor, _config(tmp_path, job, 2, steps=5, **second))
    # resumed from step 3's checkpoint: only steps 4 and 5 ran, and the loss kept going down from there
    assert [r["step"] for r in resumed] == [4, 5]
    assert resumed[0]["loss"] < losses[0] and resumed[1]["loss"] < losses[1], (losses, resumed)

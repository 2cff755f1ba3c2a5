"""One attempt on Ray: a detached, named actor that runs a Ray Train `TorchTrainer` for the
placement and buffers its per-step reports.

Why an actor and not `fit()` in the server: a detached actor outlives the server process, so a
restarted server finds the attempt by name and keeps collecting its reports (`adopt`), instead of
losing the run. The server polls it. To cancel, the server calls `cancel()`, which removes the
worker group's placement group (so the GPUs are free when it returns), then `ray.kill`s the runner,
which tears the trainer down. A runner cancelled before its workers have named their group (they
are still starting) removes the group the moment they do, and then ends itself.
"""

from __future__ import annotations

import threading
import time

import ray

from frenzy.executor import placement, ray_env
from frenzy.executor.failures import classify
from frenzy.executor.resources import LABEL_NODE, NAMESPACE, gpu_resource

# A runner cancelled during start-up waits this long for its workers to name their placement group,
# then ends itself anyway: its group is still waiting for GPUs (Ray Train retries a worker-group
# start that times out, see ray_env), and waiting longer frees nothing sooner.
NAMELESS_CANCEL_GRACE_S = 180.0


def actor_name(job_id: str, attempt: int) -> str:
    return f"frenzy-attempt-{job_id}-{attempt}"


def _callback(runner_name: str):
    from ray.train import UserCallback

    class ForwardReports(UserCallback):
        """Runs in the Ray Train controller: forwards what workers report to the attempt runner."""

        def __init__(self):
            self.runner = None

        def after_report(self, run_context, metrics, checkpoint):
            if self.runner is None:
                self.runner = ray.get_actor(runner_name, namespace=NAMESPACE)
            self.runner.push.remote(list(metrics))

    return ForwardReports()


def scaling_config(launch: dict):
    """Workers on the placement's nodes, one fake or real GPU each, ranks grouped by node so every
    tensor-parallel group (consecutive ranks) lands on one node."""
    from ray.train import ScalingConfig

    gpu_type = launch["choice"]["gpu_type"]
    selectors = [{LABEL_NODE: node} for node, gpus in launch["allocation"] for _ in range(gpus)]
    use_gpu = not launch["worker_config"]["fake_gpu"]
    resources = {"CPU": 1, gpu_resource(gpu_type): 1}
    if use_gpu:
        resources["GPU"] = 1
    return ScalingConfig(num_workers=len(selectors), use_gpu=use_gpu, resources_per_worker=resources,
                         label_selector=selectors, placement_strategy="PACK")


@ray.remote(num_cpus=0, max_concurrency=4)
class AttemptRunner:
    def __init__(self, launch: dict, storage_path: str):
        self.launch, self.storage_path = launch, storage_path
        self.events: list[dict] = []
        self.state = "starting"
        self.placement_group: str | None = None  # hex id, once rank 0 has named it
        self.cancelled = False
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from ray.train import FailureConfig, RunConfig
        from ray.train.torch import TorchTrainer

        from frenzy.executor.rendezvous import BoundTorchConfig

        launch = self.launch
        fake = launch["worker_config"]["fake_gpu"]
        trainer = TorchTrainer(
            placement.train_after_reporting_placement_group, train_loop_config=launch["worker_config"],
            scaling_config=scaling_config(launch),
            # the rendezvous store listens on rank 0's node address, not on every interface
            torch_config=BoundTorchConfig(backend="gloo" if fake else "nccl"),
            run_config=RunConfig(name=f"{launch['job_id']}-attempt-{launch['attempt']}",
                                 storage_path=self.storage_path,
                                 # Frenzy re-plans; Ray retries only a start whose GPUs are slow to free
                                 failure_config=FailureConfig(
                                     max_failures=0, max_preemption_failures=0,
                                     controller_failure_limit=ray_env.WORKER_GROUP_START_RETRIES),
                                 callbacks=[_callback(actor_name(launch["job_id"], launch["attempt"]))]))
        self.state = "running"
        try:
            trainer.fit()
            self._finish("succeeded", "")
        except Exception as exc:  # the worker-group error carries each rank's exception
            self._finish(*classify(exc))

    def _finish(self, outcome: str, error: str) -> None:
        with self.lock:
            self.events.append({"kind": "finished", "outcome": outcome, "error": error, "t": time.time()})
            self.state = outcome
            cancelled = self.cancelled
        if cancelled:  # nobody polls a cancelled attempt: end here rather than linger
            self._end_self()

    def hold_placement_group(self, group_id: str) -> None:
        """Rank 0 names the worker group's placement group (before training starts)."""
        with self.lock:
            self.placement_group = group_id
            self.events.append({"kind": "placement_group", "id": group_id, "t": time.time()})
            cancelled = self.cancelled
        if cancelled:
            placement.release(group_id)

    def cancel(self) -> bool:
        """Give the attempt's GPUs back now. True: they are free (or were never taken, or the run
        is over and Ray Train gave them back) and the caller may kill this runner. False: the
        workers have not named their group yet; this runner removes it when they do
        (`hold_placement_group`) and then ends itself."""
        with self.lock:
            self.cancelled = True
            group_id, training = self.placement_group, self.state in ("starting", "running")
        if group_id is not None:
            placement.release(group_id)
            return True
        if not training:
            return True
        threading.Timer(NAMELESS_CANCEL_GRACE_S, self._end_self).start()
        return False

    @staticmethod
    def _end_self() -> None:
        ray.kill(ray.get_runtime_context().current_actor, no_restart=True)

    def push(self, metrics: list[dict]) -> None:
        with self.lock:
            self.events.append({"kind": "progress", "ranks": metrics, "t": time.time()})

    def poll(self, cursor: int) -> tuple[list[dict], int, str]:
        with self.lock:
            return self.events[cursor:], len(self.events), self.state

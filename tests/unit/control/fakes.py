"""In-process collaborators for the control loop's unit tests (the e2e tests use real Ray)."""

from __future__ import annotations

from dataclasses import replace

from frenzy.control.ports import Finished, Launch, NodeInfo, Progress
from frenzy.control.states import AttemptOutcome
from frenzy.core import catalog


class FakeClock:
    def __init__(self, start: float = 1_000.0):
        self.t = start

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


def node(name: str, gpu: str, gpus: int, memory_bytes: int | None = None) -> NodeInfo:
    gpu_type = catalog.gpu_type(gpu)
    if memory_bytes is not None:
        gpu_type = replace(gpu_type, memory_bytes=memory_bytes)
    return NodeInfo(name=name, gpu_type=gpu_type, gpus=gpus)


class InProcessExecutor:
    """Records launches; the test decides what the 'cluster' reports back."""

    def __init__(self, nodes):
        self._nodes = list(nodes)
        self.launched: list[Launch] = []
        self.cancelled: list[tuple[str, int]] = []
        self.pending: list = []
        self.alive: set[tuple[str, int]] = set()
        self.adopted: list[tuple[str, int]] = []

    def nodes(self):
        return list(self._nodes)

    def free_gpus(self):
        return None  # no cluster beside the bookkeeping: all of it is Frenzy's

    def check_feasible(self, launch):
        have = {n.name: n.gpus for n in self._nodes}
        for name, gpus in launch.allocation:
            if have.get(name, 0) < gpus:
                return f"node {name} has fewer than {gpus} GPUs"
        return None

    def submit(self, launch):
        self.launched.append(launch)
        self.alive.add((launch.job_id, launch.attempt))

    def poll(self):
        out, self.pending = self.pending, []
        return out

    def cancel(self, job_id, attempt):
        self.cancelled.append((job_id, attempt))
        self.alive.discard((job_id, attempt))

    def is_running(self, job_id, attempt):
        return (job_id, attempt) in self.alive

    def adopt(self, job_id, attempt):
        self.adopted.append((job_id, attempt))

    # test helpers
    def report(self, launch: Launch, step: int, peak: int, **metrics):
        self.pending.append(Progress(job_id=launch.job_id, attempt=launch.attempt, step=step,
                                     metrics={"loss": 1.0, "peak_bytes": [peak] * launch.num_workers,
                                              "peak_source": "emulated", **metrics}))

    def finish(self, launch: Launch, outcome=AttemptOutcome.SUCCEEDED, peak: int | None = None, error=""):
        self.alive.discard((launch.job_id, launch.attempt))
        self.pending.append(Finished(job_id=launch.job_id, attempt=launch.attempt, outcome=outcome, error=error,
                                     peak_bytes=(peak,) * launch.num_workers if peak else (),
                                     peak_source="emulated" if peak else ""))

"""The control service: what the API calls. Owns the loop thread; validates and plans
submissions against the live cluster so a job that cannot run is refused, never queued."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path

from frenzy.control.artifacts import artifact_root
from frenzy.control.data_check import check_data
from frenzy.control.data_process import run_limited
from frenzy.data.prepare import DataReport
from frenzy.control.inputs import InputPolicy
from frenzy.control.loop import ControlLoop, free_gpus
from frenzy.control.planner import ClusterShape
from frenzy.control.ports import Clock, Executor, JobStore
from frenzy.control.records import LOCAL_USER, JobRecord
from frenzy.control.request import SYNTHETIC, JobRequest
from frenzy.control.teams import team_usage
from frenzy.core.job import JobSpec
from frenzy.memory.plans import PlanChoice

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterView:
    nodes: list[dict]
    by_type: dict[str, dict[str, int]]
    teams: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)  # team -> type -> quota/used/borrowed


class ControlService:
    def __init__(self, *, store: JobStore, executor: Executor, clock: Clock, loop: ControlLoop,
                 tick_s: float = 0.5, inputs: InputPolicy | None = None):
        self.store, self.executor, self.clock, self.loop = store, executor, clock, loop
        self.inputs = inputs if inputs is not None else InputPolicy()  # no data roots: no path is read
        self.tick_s = tick_s
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.step_errors = 0

    # ---- background loop ------------------------------------------------------------------

    def start(self) -> None:
        lost = self.loop.reconcile()
        if lost:
            log.warning("reconciled after restart: %d attempt(s) lost and re-queued: %s", len(lost), lost)
        self._thread = threading.Thread(target=self._run, name="frenzy-control-loop", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.loop.step()
            except Exception:  # keep serving: one bad step must not stop every job
                self.step_errors += 1
                log.exception("control loop step failed")
            self._wake.wait(self.tick_s)
            self._wake.clear()

    def nudge(self) -> None:
        """Run the next step now (a submission should not wait a whole tick to be placed)."""
        self._wake.set()

    # ---- API operations -------------------------------------------------------------------

    def shape(self) -> ClusterShape:
        return ClusterShape.from_nodes([n for n in self.executor.nodes() if n.alive])

    def plan(self, request: JobRequest) -> tuple[JobSpec, list[PlanChoice]]:
        """Plans against the live cluster with the learnt calibration; raises with what to change."""
        request = self.inputs.check(request)
        spec = request.job_spec()
        shape = self.shape()
        return spec, self.loop.choices(request, spec, shape, shape.signature(), 1.0, self.store.calibration())

    def submit(self, request: JobRequest, owner: str = LOCAL_USER) -> tuple[JobRecord, list[PlanChoice]]:
        return self.queue(*self.check_data(request), owner=owner)

    def check_data(self, request: JobRequest) -> tuple[JobRequest, DataReport | None]:
        """The slow part of a submission: the inputs checked and the job's data read as the workers will,
        in a child process within the operator's memory and time limits (frenzy.control.data_process)."""
        request = self.inputs.check(request)
        if request.dataset == SYNTHETIC:
            return check_data(request)  # no data file to read: no child process
        return run_limited(check_data, request, limits=self.inputs.check_limits)

    def queue(self, request: JobRequest, data: DataReport | None,
              owner: str = LOCAL_USER) -> tuple[JobRecord, list[PlanChoice]]:
        """Plan a checked request and queue it."""
        _, choices = self.plan(request)
        job = self.store.create_job(name=request.display_name(), request=request.to_json(),
                                    priority=request.priority, now=self.clock.now(), owner=owner)
        lines = [f"[frenzy] submitted {job.name}: {len(choices)} runnable plan(s)"]
        lines += [f"[frenzy] {line}" for line in (data.lines() if data else [])]
        self.store.append_logs(job.id, lines, now=self.clock.now())
        self.nudge()
        return job, choices

    def cancel(self, job_id: str) -> JobRecord:
        job = self.store.get_job(job_id)
        if job.state.is_terminal:
            return job
        job = self.store.request_cancel(job_id, now=self.clock.now())
        self.nudge()
        return job

    def artifact_root(self, job_id: str) -> Path:
        return artifact_root(self.loop.settings.storage_root, job_id)

    def cluster(self) -> ClusterView:
        """Free GPUs as the scheduler sees them: what both Frenzy's bookkeeping and Ray leave free.
        GPUs Ray holds outside Frenzy's attempts (an ended attempt's group not yet removed, a
        foreign placement group) count as used, and per type also as `held_outside`."""
        nodes, by_type = [], {}
        every = self.executor.nodes()
        free = free_gpus(self.store, self.executor, [n for n in every if n.alive])
        for n in every:
            f, _mine, outside = free.get(n.name, (n.gpus, 0, 0))
            nodes.append(dict(name=n.name, gpu_type=n.gpu_type.name, gpu_memory_bytes=n.gpu_type.memory_bytes,
                              total_gpus=n.gpus, used_gpus=n.gpus - f, free_gpus=f, alive=n.alive))
            row = by_type.setdefault(n.gpu_type.name, {"total": 0, "used": 0, "free": 0, "held_outside": 0})
            if n.alive:
                row["total"] += n.gpus
                row["used"] += n.gpus - f
                row["free"] += f
                row["held_outside"] += outside
        return ClusterView(nodes=nodes, by_type=by_type,
                           teams=team_usage(self.store, {n.name: n.gpu_type.name for n in every}))

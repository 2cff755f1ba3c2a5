"""The control loop: one `step()` honours cancellations, collects executor events, plans queued
jobs with MARP against the live cluster, asks the scheduling policy for decisions and hands the
placements to the executor. Clock, store and executor are injected, so `step()` runs on fake time.
A node's free GPUs are the fewer of Frenzy's bookkeeping and, where the executor can say
(`free_gpus()`), what the cluster really has free: never a GPU Ray still holds.

Cancels come first and planning is bounded (`plan_budget_s` of work per step, highest priority
first, plans shared between identical requests on the same cluster shape), so a cancel takes
effect within one step however long the queue is; what is not planned this step is next step.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from frenzy.control import outcomes
from frenzy.control.data_check import data_spec
from frenzy.control.planner import ClusterShape, plan_request
from frenzy.control.ports import Clock, Executor, Finished, JobStore, Launch, LogLines, NodeInfo, Progress
from frenzy.control.records import AttemptRecord, JobRecord
from frenzy.control.request import JobRequest
from frenzy.control.states import AttemptOutcome, JobState
from frenzy.control.teams import teams_for_jobs
from frenzy.core.errors import FrenzyError
from frenzy.core.hf_cache import local_model_folder
from frenzy.core.job import JobSpec
from frenzy.core.one_at_a_time import ProfilerBusy
from frenzy.memory.plans import PlanChoice
from frenzy.sched import ClusterState, NodeState, Place, Preempt, QueuedJob, RunningJob, get_policy
from frenzy.sched.quotas import QuotaScheduler
from frenzy.train.config import WorkerConfig

log = logging.getLogger(__name__)
PLAN_CACHE_SIZE = 512


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopSettings:
    policy: str = "frenzy"
    storage_root: Path = Path("~/.frenzy/jobs")
    fake_gpu: bool = True  # workers emulate GPUs on CPU (OOM test hook on)
    checkpoint_every: int = 5
    step_delay_s: float = 0.0
    # Wall-clock seconds of planning per step (at least one job is planned); None: plan all.
    plan_budget_s: float | None = 0.5


@dataclass(frozen=True, slots=True, kw_only=True)
class StepReport:
    now: float
    events: int
    planned: int
    placed: tuple[str, ...]
    waiting: int


@dataclass(slots=True)
class _Planned:
    spec: JobSpec
    request: JobRequest
    choices: list[PlanChoice]
    shape: tuple


@dataclass(slots=True)
class LoopListeners:
    """Hooks for metrics: called after the store has recorded the fact."""

    on_placed: list[Callable[[JobRecord, float], None]] = field(default_factory=list)  # job, latency s


class ControlLoop:
    def __init__(self, *, store: JobStore, executor: Executor, clock: Clock,
                 settings: LoopSettings = LoopSettings(), listeners: LoopListeners | None = None):
        self.store, self.executor, self.clock, self.settings = store, executor, clock, settings
        self.policy = get_policy(settings.policy)
        self.counters = outcomes.OutcomeCounters()
        self.listeners = listeners or LoopListeners()
        self._planned: dict[str, _Planned] = {}
        self._launched: dict[tuple[str, int], tuple[PlanChoice, float]] = {}  # (job, attempt) -> (plan, start)
        # (request, cluster shape, calibration factors) -> plans or the reason there are none
        self._plan_cache: OrderedDict[tuple, list[PlanChoice] | Exception] = OrderedDict()
        self._plan_lock = threading.Lock()

    # ---- one step -------------------------------------------------------------------------

    def step(self) -> StepReport:
        now = self.clock.now()
        self._cancel(now)  # first: a cancel never waits behind events or planning
        events = self._collect(now)
        nodes = [n for n in self.executor.nodes() if n.alive]
        shape = ClusterShape.from_nodes(nodes)
        planned = self._plan(now, shape)
        placed, waiting = self._schedule(now, nodes, shape)
        return StepReport(now=now, events=events, planned=planned, placed=tuple(placed), waiting=waiting)

    def reconcile(self) -> list[str]:
        """After a (re)start: re-attach to attempts still alive on the cluster, mark the others lost."""
        now = self.clock.now()
        lost = []
        for job in self.store.list_jobs([JobState.PLACED, JobState.RUNNING]):
            if self.executor.is_running(job.id, job.attempts):
                self.executor.adopt(job.id, job.attempts)
                self.store.append_logs(job.id, [f"[frenzy] server restarted; re-attached to attempt {job.attempts}"],
                                       now=now)
                continue
            lost.append(job.id)
            event = Finished(job_id=job.id, attempt=job.attempts, outcome=AttemptOutcome.LOST,
                             error="its Ray actors are gone (server or cluster restarted)")
            if outcomes.apply_finished(self.store, job, event, now, self.counters):
                self._planned.pop(job.id, None)
        return lost

    # ---- phases ---------------------------------------------------------------------------

    def _collect(self, now: float) -> int:
        events = self.executor.poll()
        for event in events:
            job = self.store.get_job(event.job_id)
            if isinstance(event, LogLines):
                outcomes.apply_logs(self.store, event, now)
            elif event.attempt != job.attempts or job.state.is_terminal and isinstance(event, Progress) \
                    or job.state in (JobState.QUEUED, JobState.PLANNING):
                continue  # a late report from an attempt that is already over (preempted, lost, cancelled)
            elif isinstance(event, Progress):
                outcomes.apply_progress(self.store, job, event, now)
            elif isinstance(event, Finished):
                if outcomes.apply_finished(self.store, job, event, now, self.counters):
                    self._planned.pop(job.id, None)
        return len(events)

    def _cancel(self, now: float) -> None:
        for job in self.store.list_jobs([s for s in JobState if not s.is_terminal], light=True,
                                        cancel_requested=True):
            if job.state.is_active:
                self.executor.cancel(job.id, job.attempts)
                self.store.update_attempt(job.id, job.attempts, outcome=AttemptOutcome.CANCELLED, ended_at=now)
            self.store.transition(job.id, JobState.CANCELLED, now=now, finished_at=now, allocation=())
            self.store.append_logs(job.id, ["[frenzy] cancelled by request"], now=now)
            self._planned.pop(job.id, None)

    def _plan(self, now: float, shape: ClusterShape) -> int:
        signature = shape.signature()
        todo = [j for j in self.store.list_jobs([JobState.QUEUED, JobState.PLANNING], light=True)
                if j.id not in self._planned or self._planned[j.id].shape != signature]
        todo.sort(key=lambda j: (-j.priority, j.submitted_at, j.id))
        calibration = self.store.calibration() if todo else {}
        budget = self.settings.plan_budget_s
        deadline = time.monotonic() + budget if budget is not None else float("inf")
        count = 0
        for job in todo:
            if count and time.monotonic() > deadline:
                break  # the rest next step: a long queue must not hold up cancels and placements
            job = self.store.get_job(job.id)  # with its request
            count += 1
            try:
                request = JobRequest.from_json(job.request)
                spec = request.job_spec()
                choices = self.choices(request, spec, shape, signature, self._oom_ratio(job), calibration)
            except ProfilerBusy:
                break  # API requests are profiling new families: this job next step, nothing wrong with it
            except (FrenzyError, ValueError) as exc:
                self._fail(job, now, f"no runnable plan: {exc}")
                continue
            family = spec.model.family
            self._planned[job.id] = _Planned(spec=spec, request=request, choices=choices, shape=signature)
            if job.state is JobState.QUEUED or not job.plans:
                self.store.transition(job.id, JobState.PLANNING, now=now, plans=[_choice_json(c, family)
                                                                                  for c in choices])
                self.store.append_logs(job.id, [f"[frenzy] planned {len(choices)} plan(s); best: "
                                                f"{_describe(choices[0])}"], now=now)
            else:
                self.store.update_job(job.id, now=now, plans=[_choice_json(c, family) for c in choices])
        return count

    def choices(self, request: JobRequest, spec: JobSpec, shape: ClusterShape, signature: tuple,
                own: float, calibration: dict) -> list[PlanChoice]:
        """MARP's plans, shared by identical requests on the same shape with the same corrections (the
        loop's re-plans and the API's submissions alike: API threads call this beside the loop)."""
        family = spec.model.family
        factors = {t: max(own, calibration.get((family, t), (1.0, 0))[0]) for t in sorted(shape.types)}
        fields = {k: v for k, v in request.to_json().items() if k not in ("name", "priority")}  # not planned on
        key = (json.dumps(fields, sort_keys=True, default=str), signature, tuple(factors.items()))
        with self._plan_lock:
            cached = self._plan_cache.get(key)
            if cached is not None:
                self._plan_cache.move_to_end(key)
        if cached is None:
            try:
                cached = plan_request(request, spec, shape, lambda gpu: factors.get(gpu, own))
            except (FrenzyError, ValueError) as exc:  # kept as raised: "nothing fits" stays a 409 at the API
                cached = exc.with_traceback(None)
            with self._plan_lock:
                self._plan_cache[key] = cached
                while len(self._plan_cache) > PLAN_CACHE_SIZE:
                    self._plan_cache.popitem(last=False)
        if isinstance(cached, Exception):
            raise cached
        return list(cached)

    def _oom_ratio(self, job: JobRecord) -> float:
        """This job's own evidence: the largest need/predicted ratio of its OOMs. An OOM proves the
        step needed more than the card and at least the peak observed (a real CUDA OOM gives only
        that lower bound), measured against the bytes that decided the fit (`required_bytes`).
        Unlike the shared calibration it is not bounded, so the re-plan always has strictly more
        headroom than the plan that ran out of memory."""
        if not job.attempts:
            return 1.0
        ratios = [1.0]
        for a in self.store.attempts(job.id):
            predicted = int(a.choice.get("memory", {}).get("required_bytes") or a.predicted_device_bytes)
            if a.outcome is AttemptOutcome.OOM and predicted > 0:
                need = max((*a.observed_peak_bytes, int(a.choice.get("gpu_memory_bytes", 0))))
                ratios.append(need / predicted)
        return max(ratios)

    def _fail(self, job: JobRecord, now: float, reason: str) -> None:
        self.store.transition(job.id, JobState.FAILED, now=now, finished_at=now, failure_reason=reason)
        self.store.append_logs(job.id, [f"[frenzy] failed: {reason}"], now=now)
        self._planned.pop(job.id, None)

    def _schedule(self, now: float, nodes: list[NodeInfo], shape: ClusterShape) -> tuple[list[str], int]:
        waiting = [j for j in self.store.list_jobs([JobState.PLANNING], light=True) if j.id in self._planned]
        if not waiting:
            return [], 0
        free = free_gpus(self.store, self.executor, nodes)
        active = self.store.list_jobs([JobState.PLACED, JobState.RUNNING], light=True)
        teams = teams_for_jobs(self.store.list_teams(), {j.id: j.owner for j in waiting + active})
        state = ClusterState(nodes=tuple(
            NodeState(name=n.name, gpu_type=n.gpu_type.name, total_gpus=n.gpus, free_gpus=free[n.name][0],
                      inter_node_bandwidth_bytes_s=n.gpu_type.inter_node_bandwidth_bytes_s) for n in nodes),
            running=self._running(active, shape) if teams is not None else ())
        waiting.sort(key=lambda j: (-j.priority, j.submitted_at, j.id))
        queue = [QueuedJob(job_id=j.id, spec=self._planned[j.id].spec, plans=tuple(self._planned[j.id].choices),
                           submit_time_s=j.submitted_at, attempts=j.attempts, priority=j.priority,
                           objective=self._planned[j.id].request.objective) for j in waiting]
        by_id = {j.id: j for j in waiting}
        policy = self.policy if teams is None else QuotaScheduler(self.policy, teams)
        decisions = policy.schedule(state, queue, now)
        for decision in decisions:  # first: a placement may use the GPUs a preemption frees
            if isinstance(decision, Preempt):
                self._preempt(decision, now)
        placed = []
        for decision in decisions:
            if isinstance(decision, Place) and decision.job_id in by_id and \
                    self._launch(by_id[decision.job_id], decision, shape, now):
                placed.append(decision.job_id)
        return placed, len(waiting) - len(placed)

    def _running(self, active: list[JobRecord], shape: ClusterShape) -> tuple[RunningJob, ...]:
        """Placed and running jobs as the scheduler sees them (plan, GPUs, start of this attempt); a job
        placed by an earlier server process has its plan found again among its request's plans."""
        current = {(j.id, j.attempts) for j in active}
        self._launched = {k: v for k, v in self._launched.items() if k in current}
        out = []
        for job in active:
            known = self._launched.get((job.id, job.attempts)) or self._relearn(job, shape)
            if known is None:
                log.warning("job %s: its running plan is not among its plans; not counted against its team", job.id)
                continue
            self._launched[(job.id, job.attempts)] = known
            out.append(RunningJob(job_id=job.id, choice=known[0], allocation=job.allocation, start_time_s=known[1]))
        return tuple(out)

    def _relearn(self, job: JobRecord, shape: ClusterShape) -> tuple[PlanChoice, float] | None:
        job = self.store.get_job(job.id)
        attempt = self.store.attempt(job.id, job.attempts)
        try:
            request = JobRequest.from_json(job.request)
            choices = self.choices(request, request.job_spec(), shape, shape.signature(), self._oom_ratio(job),
                                   self.store.calibration())
        except (FrenzyError, ValueError):
            return None
        same = [c for c in choices if c.gpu.name == attempt.gpu_type and c.num_gpus == attempt.choice.get("num_gpus")]
        exact = [c for c in same if c.plan.describe() == attempt.choice.get("describe")]
        return ((exact or same)[0], attempt.started_at) if same else None

    def _preempt(self, decision: Preempt, now: float) -> None:
        job = self.store.get_job(decision.job_id)
        if not job.state.is_active:
            return
        self.executor.cancel(job.id, job.attempts)
        outcomes.apply_preempted(self.store, job, decision.reason, now)
        self.counters.preemptions += 1

    def _launch(self, job: JobRecord, decision: Place, shape: ClusterShape, now: float) -> bool:
        planned = self._planned[job.id]
        choice = decision.choice
        number = job.attempts + 1
        launch = Launch(job_id=job.id, attempt=number, choice=_choice_json(choice, planned.spec.model.family),
                        allocation=decision.allocation,
                        worker_config=self._worker_config(job, planned, choice, number).to_json())
        reason = self.executor.check_feasible(launch)
        if reason is not None:
            self.store.append_logs(job.id, [f"[frenzy] not submitted: {reason}"], now=now)
            return False
        # Store first, then submit: a crash in between leaves a PLACED job with no actors, which
        # reconcile() marks lost and re-plans, instead of actors the store knows nothing about.
        self.store.add_attempt(AttemptRecord(job_id=job.id, number=number, outcome=AttemptOutcome.RUNNING,
                                             choice=launch.choice, allocation=decision.allocation, started_at=now))
        self._launched[(job.id, number)] = (choice, now)
        job = self.store.transition(job.id, JobState.PLACED, now=now, chosen=launch.choice,
                                    allocation=decision.allocation, attempts=number,
                                    placed_at=job.placed_at or now)
        where = ", ".join(f"{n}:{g}" for n, g in decision.allocation)
        self.store.append_logs(job.id, [f"[frenzy] attempt {number}: placed {_describe(choice)} on {where}"], now=now)
        try:
            self.executor.submit(launch)
        except Exception as exc:  # the cluster refused it: record why and let the job re-plan
            log.exception("submit failed for %s", job.id)
            outcomes.apply_finished(self.store, job, Finished(job_id=job.id, attempt=number,
                                    outcome=AttemptOutcome.LOST, error=f"submit failed: {exc}"), now, self.counters)
            self._planned.pop(job.id, None)
            return False
        for hook in self.listeners.on_placed:
            hook(job, now - job.submitted_at)
        return True

    def _worker_config(self, job: JobRecord, planned: _Planned, choice: PlanChoice, attempt: int) -> WorkerConfig:
        req, spec, plan = planned.request, planned.spec, choice.plan
        cfg, name = req.config_and_name()
        folder = local_model_folder(req.model)
        data = data_spec(req)
        return WorkerConfig(
            job_id=job.id, attempt=attempt, model_name=name, family=spec.model.family, hf_config=cfg,
            local_weights=str(folder) if folder else None, method=req.method, precision=req.precision,
            optimizer=req.optimizer, learning_rate=req.learning_rate, lora_rank=req.lora_rank,
            lora_targets=tuple(req.lora_targets), seq_len=req.seq_len, global_batch=req.global_batch,
            steps=spec.steps, dataset=req.dataset, data=data.to_json() if data else None, seed=req.seed,
            lr_schedule=req.lr_schedule, warmup_steps=req.warmup_steps, weight_decay=req.weight_decay,
            max_grad_norm=req.max_grad_norm, eval_every=req.eval_every, merge_lora=req.merge_lora,
            export_every_checkpoint=req.export_every_checkpoint,
            request=req.to_json(), plan=_choice_json(choice, spec.model.family),
            dp=plan.dp, tp=plan.tp, pp=plan.pp, sequence_parallel=plan.sequence_parallel, zero=int(plan.zero),
            micro_batch=plan.micro_batch, grad_accum=plan.grad_accum,
            recompute=plan.recompute.name.lower(), mixed_precision=plan.mixed_precision.value,
            storage_path=str((self.settings.storage_root / job.id).expanduser()),
            checkpoint_every=self.settings.checkpoint_every, gpu_type=choice.gpu.name,
            gpu_memory_bytes=choice.gpu.memory_bytes, predicted_peak_bytes=choice.memory.device_bytes,
            runtime_overhead_bytes=choice.memory.breakdown.get("runtime_overhead", 0),
            fake_gpu=self.settings.fake_gpu, emulate_peak_factor=req.emulation.peak_factor,
            step_delay_s=self.settings.step_delay_s)


def free_gpus(store: JobStore, executor: Executor, nodes: list[NodeInfo]) -> dict[str, tuple[int, int, int]]:
    """Per node: (free, used by Frenzy's attempts, held outside Frenzy). Free is what both Frenzy's
    bookkeeping and the executor's `free_gpus()` leave free (the Ray executor: what Ray has not
    reserved): GPUs still held by an ended attempt's placement group, or by anything outside
    Frenzy, are never offered to the scheduler."""
    used: dict[str, int] = {}
    for job in store.list_jobs([JobState.PLACED, JobState.RUNNING], light=True):
        for node, gpus in job.allocation:
            used[node] = used.get(node, 0) + gpus
    actual = executor.free_gpus()
    out = {}
    for n in nodes:
        mine = min(used.get(n.name, 0), n.gpus)
        booked = n.gpus - mine
        free = booked if actual is None or n.name not in actual else max(0, min(booked, int(actual[n.name])))
        out[n.name] = (free, mine, booked - free)
    return out


def _describe(choice: PlanChoice) -> str:
    return f"{choice.num_gpus}x {choice.gpu.name} {choice.plan.describe()}"


def _choice_json(choice: PlanChoice, family: str) -> dict:
    return {**choice.to_json(), "describe": choice.plan.describe(), "family": family,
            "gpu_memory_bytes": choice.gpu.memory_bytes}

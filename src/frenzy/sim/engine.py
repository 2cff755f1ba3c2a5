"""The discrete-event simulator: arrivals, completions, out-of-memory failures and scheduling
rounds are events on a heap; nothing advances in fixed time steps.

It stands in for the control loop's API, store, executor and clock, and calls the very same MARP
planner (frenzy.memory), perf model (frenzy.perf) and policies (frenzy.sched) as the live system.
Rules it applies (docs/SIMULATOR.md):
  - every start costs `startup_s` before the first step, a restart after preemption `restore_s` more;
  - a job runs at the perf model's step time for its plan, its GPU type (widest node in this cluster)
    and the nodes it actually got; a preempted job keeps the steps it finished (checkpoint on stop);
  - a job's true peak is MARP's prediction x its seeded error (frenzy.sim.truth); placed where that
    exceeds the GPU memory it fails after its start-up time and is resubmitted by its user
    (frenzy.sim.jobs.after_oom);
  - a policy's Preempts take effect before its Places; a Place that over-allocates a node or splits a
    tensor-parallel group across nodes is a policy bug and stops the run (SimulationError);
  - a job the policy can never run here (frenzy.sim.admission) is rejected before the run, or given
    up when an out-of-memory resubmission leaves it nothing to run on, never left queued for ever.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Callable

import numpy as np

from frenzy.core.errors import FrenzyError, NoFeasiblePlanError
from frenzy.core.hf_config import load_model
from frenzy.core.job import JobSpec
from frenzy.core.training import Method, Precision, TrainingConfig
from frenzy.memory.fit import DEFAULT_SAFETY_MARGIN
from frenzy.memory.plans import PlanChoice, plan_job
from frenzy.memory.ranking import check_objective, rank_key
from frenzy.perf.step import step_time
from frenzy.sched.configs import config_choice, duration_s, peak_bytes
from frenzy.sched.registry import Policy
from frenzy.sched.scaleout import with_scale_out
from frenzy.sched.types import ClusterState, Place, Preempt, QueuedJob, RunningChanges, RunningJob
from frenzy.sim import admission, collector, truth
from frenzy.sim.cluster import ClusterSpec
from frenzy.sim.jobs import Run, SimJob, after_oom
from frenzy.sim.result import SimResult
from frenzy.sim.trace import MAX_TIME_S, TraceJob

END, ROUND = 1, 2  # event kinds, in the order of equal times (arrivals come first)
MAX_OOMS_PER_JOB = 8  # a user gives up after this many out-of-memory failures
RESCHEDULES_AFTER_PREEMPTION = 2  # immediate extra calls for jobs a call preempted (a live loop's next tick)


def _frontier(spec: JobSpec, ranked: list, widest: dict[str, int]) -> tuple:
    """Per GPU type, the plans no other plan beats on both GPU count and speed: the fastest at each
    count, kept only if faster than every plan on fewer GPUs (rank order kept). It always holds
    the type's fastest and its leanest plan (fewest GPU-seconds); a shortlist by rank alone would
    hold only fast plans on many GPUs, leaving a contended cluster nothing lean to offer."""
    by_type: dict[str, list] = {}
    for c in ranked:
        by_type.setdefault(c.gpu.name, []).append(c)
    chosen: set[int] = set()
    for gpu, plans in by_type.items():
        seconds = {id(c): duration_s(spec, c, widest[gpu]) for c in plans}  # `spec` is one step long
        best_below = float("inf")
        for c in sorted(plans, key=lambda c: (c.num_gpus, seconds[id(c)])):
            if seconds[id(c)] < best_below:
                chosen.add(id(c))
                best_below = seconds[id(c)]
    return tuple(c for c in ranked if id(c) in chosen)


class SimulationError(FrenzyError):
    """A policy decision the cluster cannot carry out (over-allocation, a split TP group)."""


class BeyondClockError(FrenzyError):
    """A job the trace describes would run past the simulator's clock (frenzy.sim.trace.MAX_TIME_S)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SimConfig:
    seed: int = 0
    startup_s: float = 60.0  # placement to first step: container, weights, NCCL init
    restore_s: float = 30.0  # extra on a restart: loading the checkpoint
    max_gpus_per_job: int = 64
    objective: str = "time"  # MARP's plan ranking: time or cost
    safety_margin: float = DEFAULT_SAFETY_MARGIN  # the live planner's; it covers truth.MARP_ERROR_BOUND

    def __post_init__(self):
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")
        check_objective(self.objective)
        if self.startup_s < 0 or self.restore_s < 0:
            raise ValueError("startup_s and restore_s must be >= 0")
        if not 0 <= self.safety_margin < 1:
            raise ValueError(f"safety_margin must be in [0, 1), got {self.safety_margin}")


@lru_cache(maxsize=256)
def _model(name: str):
    return load_model(name)


@lru_cache(maxsize=256)
def _training(precision: str, method: str) -> TrainingConfig:
    """One record per setting, not per job: building one per job (enums, checks, its hash) was about
    a quarter of admitting a 100,000-job trace."""
    return TrainingConfig(precision=Precision(precision), method=Method(method))


class Simulator:
    def __init__(self, cluster: ClusterSpec, policy: Policy, jobs: list[TraceJob], config: SimConfig = SimConfig(),
                 on_progress: Callable[[int, int, float], None] | None = None):
        self.cluster, self.policy, self.config, self.on_progress = cluster, policy, config, on_progress
        self.types = {g.name: g for g in cluster.gpu_types()}
        self.capacity = cluster.gpus_by_type()
        self.nodes = cluster.node_states()
        self.widest_node = ClusterState(nodes=tuple(self.nodes)).widest_node_by_type()
        self.node_index = {n.name: i for i, n in enumerate(self.nodes)}
        self.round_s = getattr(policy, "round_s", None)
        self.rotates = getattr(policy, "rotates", False)
        self._plan_cache: dict[tuple, tuple] = {}
        self.jobs: list[SimJob] = []
        self._verdicts: dict[tuple, bool] = {}  # admission.shape_key -> whether the policy can run it
        self._rejections: dict[int, admission.Obstacle] | None = None
        self._step_cache: dict[tuple, float] = {}
        rng = np.random.default_rng(config.seed)
        with collector.building():
            for trace in jobs:
                self._admit(trace, truth.draw_peak_error(rng))
        self.by_id = {j.queued.job_id: j for j in self.jobs}
        if len(self.by_id) != len(self.jobs):
            raise ValueError("the trace has repeated job ids; every job needs its own")
        self.queue: dict[int, SimJob] = {}
        self.running: dict[int, RunningJob] = {}
        self.heap: list = []
        self.busy_gpus = 0
        self.busy_by_type = dict.fromkeys(self.capacity, 0)
        self._state: ClusterState | None = None
        self._built: ClusterState | None = None  # the last state built (kept while _state is reset)
        self._started: list[RunningJob] = []  # since the last state built: what it tells the policy
        self._stopped: list[RunningJob] = []
        self.result = SimResult(policy=policy.name, cluster=cluster.name, total_gpus=cluster.total_gpus,
                                capacity=self.capacity)

    def true_fits(self, job: QueuedJob, choice: PlanChoice) -> bool:
        """Whether the job's true peak under `choice` fits the GPU: what a profiling run that never
        misses would report (a memory oracle for baselines; Frenzy plans from MARP alone)."""
        return self._truly_fits(self.by_id[admission.probed_id(job.job_id)], choice)

    def _truly_fits(self, job: SimJob, choice: PlanChoice) -> bool:
        peak = truth.true_peak_bytes(peak_bytes(choice.memory), job.error)
        return peak <= self.types[choice.gpu.name].memory_bytes

    # ---- setup -----------------------------------------------------------------------------

    def _plans(self, spec: JobSpec) -> tuple:
        key = (spec.model.name, spec.training, spec.seq_len, spec.global_batch)
        if key not in self._plan_cache:
            shape = JobSpec(model=spec.model, training=spec.training, seq_len=spec.seq_len,
                            global_batch=spec.global_batch)
            found = with_scale_out(shape, self.offered_plans(shape), self.capacity, self.config.max_gpus_per_job)
            found = sorted(found, key=rank_key(self.config.objective, shape))
            self._plan_cache[key] = _frontier(shape, found, self.widest_node)
        return self._plan_cache[key]

    def offered_plans(self, spec: JobSpec) -> list[PlanChoice]:
        """MARP's plans for `spec` on this cluster: the live planner's call (memory.plans.plan_job)
        with the cluster's GPU types and counts; empty when none fits."""
        try:
            return plan_job(spec, list(self.types.values()), rank=rank_key(self.config.objective, spec),
                            max_gpus=self.config.max_gpus_per_job, available=self.capacity,
                            margin=self.config.safety_margin)
        except NoFeasiblePlanError:
            return []

    def _admit(self, trace: TraceJob, error: float) -> None:
        spec = JobSpec(model=_model(trace.model), seq_len=trace.seq_len, global_batch=trace.global_batch,
                       steps=trace.steps, training=_training(trace.precision, trace.method))
        # The request is kept as the trace says: one larger than this cluster, or for a type it lacks,
        # is rejected by the policies that keep requests (frenzy.sim.admission), not shrunk or dropped.
        gpus = trace.requested_gpus or 1
        plans = self._plans(spec)
        queued = QueuedJob(job_id=trace.job_id, spec=spec, plans=plans, submit_time_s=trace.submit_time_s,
                           requested_gpus=trace.requested_gpus, requested_gpu_type=trace.requested_gpu_type,
                           objective=self.config.objective)
        job = SimJob(len(self.jobs), trace, spec, queued, error)
        if not plans and not any(
                (c := config_choice(spec, t, n, g.gpus_per_node)) is not None and c.fits_predicted
                for t, g in self.types.items() for n in (gpus, 2 * gpus) if n <= self.capacity[t]):
            job.reason = admission.no_fit()  # nothing in this cluster can run it, under any policy
        self.jobs.append(job)

    def rejections(self) -> dict[int, admission.Obstacle]:
        """Job index -> why this policy can never run it here; found once, before the run starts (after
        construction, so that a judge set on the policy, such as Sia's `fits`, takes part)."""
        if self._rejections is None:
            self._rejections = {}
            for job in self.jobs:
                if job.reason is None and not self._runnable(job.queued):
                    job.reason = admission.obstacle(job.queued, self.types, self.capacity) \
                        or admission.unplaced(self.policy.name)
                if job.reason is not None:
                    self._rejections[job.index] = job.reason
        return self._rejections

    def _runnable(self, queued: QueuedJob) -> bool:
        key = admission.shape_key(queued)
        if key not in self._verdicts:
            self._verdicts[key] = admission.places_on_idle(self.policy, self.nodes, queued)
        return self._verdicts[key]

    # ---- the event loop --------------------------------------------------------------------

    def _push(self, t: float, kind: int, index: int, epoch: int = 0) -> None:
        heapq.heappush(self.heap, (t, kind, index, epoch))

    def run(self) -> SimResult:
        with collector.fewer_young_collections():
            return self._run()

    def _run(self) -> SimResult:
        wall = time.perf_counter()
        rejected = self.rejections()
        # Arrivals by (time, job index), kept out of the event heap, which then holds only the running
        # jobs' ends (a few hundred, not a trace's 100,000 arrivals); they go first among equal times.
        arrivals = sorted((job.submit_s, job.index) for job in self.jobs if job.index not in rejected)
        next_arrival = 0
        round_pending, changed_since_round, done, stalled = False, False, 0, False
        while next_arrival < len(arrivals) or self.heap:
            now = min(arrivals[next_arrival][0] if next_arrival < len(arrivals) else math.inf,
                      self.heap[0][0] if self.heap else math.inf)
            changed, round_due = False, False
            # every arrival at this time, then the ends and rounds due
            while next_arrival < len(arrivals) and arrivals[next_arrival][0] <= now:
                index = arrivals[next_arrival][1]
                next_arrival += 1
                self.queue[index] = self.jobs[index]
                changed = True
            while self.heap and self.heap[0][0] <= now:
                _, kind, index, epoch = heapq.heappop(self.heap)
                job = self.jobs[index]
                if kind == END and epoch == job.epoch and job.run is not None:
                    done += self._end(job, now)
                    changed = True
                elif kind == ROUND:
                    round_due, round_pending = True, False
            if self.round_s is None:
                # On every arrival and completion, empty queue included: a completion frees GPUs
                # that running jobs may grow or move into (HAS's elastic pass).
                if changed and (self.queue or self.running):
                    _, preempted = self._schedule(now)
                    # Jobs the call preempted are queued again: decide for them now, not at the next event.
                    for _ in range(RESCHEDULES_AFTER_PREEMPTION):
                        if not (self.queue and preempted):
                            break
                        _, preempted = self._schedule(now)
            else:
                changed_since_round |= changed
                if round_due and (self.queue or self.running):
                    placed, _ = self._schedule(now)
                    stalled = not placed and not self.running and not changed_since_round
                    changed_since_round = False
                wants_round = changed_since_round or (self.rotates and self.queue and not stalled)
                if not round_pending and wants_round and (self.queue or self.running):
                    self._push((now // self.round_s + 1) * self.round_s, ROUND, 0)
                    round_pending = True
            self.result.sample(now, len(self.queue), self.busy_gpus, self.busy_by_type)
            if self.on_progress is not None and changed:
                self.on_progress(done, len(self.jobs), now)
        self.result.finish(self.jobs, time.perf_counter() - wall)
        return self.result

    # ---- decisions -------------------------------------------------------------------------

    def _schedule(self, now: float) -> tuple[int, bool]:
        """One policy call applied: (jobs placed, whether any job was preempted)."""
        if self._state is None:  # rebuilt only after a placement or a release changed it
            changes = None if self._built is None else \
                RunningChanges(previous=self._built.running, started=tuple(self._started), stopped=tuple(self._stopped))
            self._state = self._built = ClusterState(nodes=tuple(self.nodes), running=tuple(self.running.values()),
                                                     changes=changes)
            self._started.clear()
            self._stopped.clear()
        state = self._state
        queue = [j.queued for j in self.queue.values()]
        t0 = time.perf_counter()
        decisions = self.policy.schedule(state, queue, now)
        elapsed = time.perf_counter() - t0
        considered = len(queue) + (len(self.running) if self.round_s is not None else 0)
        self.result.record_decision(elapsed, considered)
        by_id = self.by_id
        for d in decisions:
            if isinstance(d, Preempt):
                self._preempt(by_id[d.job_id], now)
        placed = 0
        for d in decisions:
            if isinstance(d, Place):
                self._place(by_id[d.job_id], d, now)
                placed += 1
        preempted = any(isinstance(d, Preempt) for d in decisions)
        if preempted:
            self.queue = dict(sorted(self.queue.items(), key=lambda kv: (kv[1].submit_s, kv[0])))
        return placed, preempted

    def _set_free(self, name: str, delta: int) -> None:
        i = self.node_index[name]
        n = self.nodes[i]
        free = n.free_gpus + delta
        if not 0 <= free <= n.total_gpus:
            raise SimulationError(f"node {name} would have {free} free of {n.total_gpus} GPUs; a policy "
                                  "placed more GPUs than the node has")
        self.nodes[i] = n.with_free(free)
        self._state = None
        self.busy_gpus -= delta
        self.busy_by_type[n.gpu_type] -= delta

    def _place(self, job: SimJob, d: Place, now: float) -> None:
        if job.index not in self.queue:
            raise SimulationError(f"policy {self.policy.name} placed job {d.job_id}, which is not queued")
        gpu_name, tp = d.choice.gpu.name, d.choice.plan.tp
        for name, gpus in d.allocation:
            node = self.nodes[self.node_index[name]]
            if node.gpu_type != gpu_name:
                raise SimulationError(f"job {d.job_id}: plan on {gpu_name} placed on {name} ({node.gpu_type})")
            if gpus % tp:
                raise SimulationError(f"job {d.job_id}: {gpus} GPUs on {name} split a tensor-parallel group of {tp}")
            self._set_free(name, -gpus)
        gpu = self.types[gpu_name]
        oom = not self._truly_fits(job, d.choice)
        startup = self.config.startup_s + (self.config.restore_s if job.started_before else 0.0)
        key = (job.index, gpu_name, d.choice.plan, len(d.allocation))  # a job's shape never changes
        step_s = self._step_cache.get(key)
        if step_s is None:
            step_s = self._step_cache[key] = step_time(job.spec, d.choice.plan, gpu, nodes=len(d.allocation)).total_s
        finish = now + startup + job.remaining_steps * step_s
        if not finish <= MAX_TIME_S:  # NaN too
            raise BeyondClockError(f"job {d.job_id} ({job.remaining_steps:,} steps left at {step_s:.3g} s each on "
                                  f"{len(d.allocation)} node(s) of {gpu_name}) would end at {finish:.4g} s, past the "
                                  f"simulator's {MAX_TIME_S:.4g} s (~285 years); check its steps in the trace")
        end = now + startup if oom else finish
        job.run = Run(d.choice, d.allocation, now, now + startup, step_s, end, oom, gpu)
        job.first_start_s = now if job.first_start_s is None else job.first_start_s
        job.started_before = True
        del self.queue[job.index]
        self.running[job.index] = run = RunningJob(job_id=d.job_id, choice=d.choice, allocation=d.allocation,
                                                   start_time_s=now, expected_end_s=finish, job=job.queued)
        self._started.append(run)
        self._push(end, END, job.index, job.epoch)

    def _stop(self, job: SimJob, now: float, useful_s: float, how: str) -> Run:
        run = job.run
        job.account(run, now, useful_s, how)
        for name, gpus in run.allocation:
            self._set_free(name, gpus)
        job.run = None
        job.epoch += 1
        self._stopped.append(self.running.pop(job.index))
        return run

    def _preempt(self, job: SimJob, now: float) -> None:
        if job.run is None:
            raise SimulationError(f"policy {self.policy.name} preempted job {job.queued.job_id}, which is not running")
        run = job.run
        steps = 0.0 if run.oom else min(job.remaining_steps, max(0.0, now - run.compute_start_s) / run.step_s)
        self._stop(job, now, steps * run.step_s, "preempted")
        job.remaining_steps -= steps
        job.preemptions += 1
        # It resumes from its checkpoint: the scheduler sees only the steps still to run.
        left = max(1, math.ceil(job.remaining_steps - 1e-9))
        job.queued = job.queued.with_steps(left)
        self.queue[job.index] = job

    def _end(self, job: SimJob, now: float) -> int:
        run = job.run
        if not run.oom:
            self._stop(job, now, job.remaining_steps * run.step_s, "finished")
            job.remaining_steps = 0.0
            job.finish_s = now
            return 1
        self._stop(job, now, 0.0, "out of memory")
        job.ooms += 1
        if job.ooms > MAX_OOMS_PER_JOB:
            job.abandon(now, admission.Obstacle(kind="oom", text=f"its user gave up after {job.ooms} "
                                                                  "out-of-memory failures"))
            return 1
        job.queued = after_oom(job.queued, run.gpu, run.num_gpus, self.types, self.capacity)
        if not self._runnable(job.queued):
            why = admission.obstacle(job.queued, self.types, self.capacity) or admission.unplaced(self.policy.name)
            job.abandon(now, replace(why, text=f"after {job.ooms} out-of-memory failures its resubmission "
                                                f"cannot run: {why.text}"))
            return 1
        self.queue[job.index] = job
        self.queue = dict(sorted(self.queue.items(), key=lambda kv: (kv[1].submit_s, kv[0])))
        return 0

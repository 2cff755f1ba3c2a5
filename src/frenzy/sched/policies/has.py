"""HAS, Frenzy's heterogeneity-aware scheduler, made time-aware.

For each queued job, walk its MARP plans in priority order (predicted finish time) and place the
first one the cluster can satisfy now on best-fit nodes (tensor parallel inside a node, fewest
nodes, least leftover); where best fit can only spread a plan over more nodes than it needs, the
plan is priced at its real step time there (its data-parallel traffic crosses the network) and
taken only if still faster than the next plan that fits on as few nodes as it needs. Beyond the
paper, predicted completion times (frenzy.perf for queued jobs, each running job's expected end)
make it time-aware:
  - order, when the queue needs more GPUs than are free: smallest work first with aging, work
    being the GPU-seconds of the job's leanest plan (the smallest-area-first rule for moldable
    jobs): the job that frees the cluster soonest goes first, while a waiting job's priority grows
    with its wait (frenzy.sched.order), so no job starves;
  - patience: a job takes a slower plan available now only if it would finish before a faster plan
    it could get later, either there or by moving to the faster plan once it frees (a
    checkpoint-restart, counted only where growth or the re-queue of slow runners would make it);
    when GPUs free comes from an availability profile: running jobs' expected ends, then each job
    ahead in the queue taking the earliest GPUs and giving them back at its end (where enough GPUs
    are free but split over nodes, when running jobs' ends free enough of them on few enough nodes);
  - joint assignment under contention: when the queue needs more GPUs than are free, the first
    ASSIGNED_JOBS jobs get their GPU type and plan from one min-cost matching of jobs to positions
    on the GPU types (frenzy.sched.assignment): each plan is priced by its own time plus the
    GPU-seconds it takes from the jobs behind it, so the fast GPUs go to the jobs that gain most
    there and a job with many behind it takes a lean plan; an assigned job takes its plan, or a
    narrower one of its type, when it fits, and otherwise waits for it (no patience). Jobs past
    the head walk their plans in finish-time order like any other;
  - lean plans: a job takes a plan that costs more GPU-seconds than its leanest plan of that GPU
    type (a wider data-parallel scale-out) only into free GPUs of the type that no job left in
    the queue needs (frenzy.sched.lean);
  - preemption: a waiting job far shorter than a running job's remaining time may evict it, where
    that frees room for its plan on as few nodes as it needs and saves it more than a restart per
    victim over waiting (frenzy.sched.preemption: shortest-job-first with a restart-cost guard);
    so may a job that would start now on a slower plan, for a faster one that saves it more than
    each victim loses (`_preempted_for_faster`);
  - elasticity: running jobs shrink to smaller plans for a waiting job when that lowers the sum of
    predicted JCTs, and grow into (or move to) GPUs of types no waiting job can use, a move that
    would spread a plan over more nodes than it needs priced at its step time there
    (frenzy.sched.elastic); a running job on a plan far slower than its best re-queues for the
    faster plans and moves when one fits (frenzy.sched.elastic.slow_runners).
A job whose plans are ranked by cost (QueuedJob.objective "cost") takes the cheapest of them it can
get: it starts now on a dearer plan only if no cheaper one is predicted to free, a placement split
over more nodes than its plan needs is priced at its split step time (and its unsplit room awaited
when predicted), and it has no joint assignment, growth, re-queue, preemption or shrinking, either
way, which all spend GPU-hours (restarts) to gain time.
Without expected ends for running jobs (a live cluster that does not report them) it is plain HAS.
Cost per job: O(plans x nodes of the plan's type) plus, for patience, O(plans x running jobs of the
plan's type) to walk the availability profile; per call, resizing adds O(plans) for each running
job it may touch, the re-queue O(running jobs) when some GPU is free, the lean rule O(queue x
types) to count what the queue needs, and a contended call the assignment, O(n^2 x types x plans)
for its n <= ASSIGNED_JOBS jobs plus the matching.
"""

from __future__ import annotations

from functools import partial
from typing import Sequence

from frenzy.memory.plans import PlanChoice
from frenzy.perf import step_time
from frenzy.sched.assignment import assign_head
from frenzy.sched.configs import duration_s
from frenzy.sched.elastic import (REQUEUE_MIN_GAIN, REQUEUE_MIN_SPEEDUP, grow_into_idle, resizable_jobs,
                                  shrink_for, slow_runners)
from frenzy.sched.lean import QueueDemand
from frenzy.sched.order import by_response_ratio, by_work
from frenzy.sched.placement import best_fit
from frenzy.sched.pool import FreePool
from frenzy.sched.preemption import preemptions_for
from frenzy.sched.profile import Profile, Releases, releases_of
from frenzy.sched.registry import register
from frenzy.sched.runfacts import RunFacts
from frenzy.sched.shapes import faster_plans, plan_grid_of, plan_options, step_seconds, usable_plans
from frenzy.sched.types import ClusterState, Decision, Place, Preempt, QueuedJob

STARTUP_ESTIMATE_S = 60.0  # expected time from placement to the first step (image, weights, NCCL)
RESTORE_ESTIMATE_S = 30.0  # a restart's extra: loading the checkpoint
# No plan is left out for being slow (a job started on slow GPUs moves when fast ones free,
# frenzy.sched.elastic.slow_runners), and no job holds a reservation (EASY backfilling): on
# bench/sim_generalise.py's design half neither a cap at 6x the job's fastest plan nor a reservation
# for a job that had waited 20x its run earned anything (docs/SIMULATOR.md); aging in the queue's
# order (frenzy.sched.order) is what bounds a job's wait.
# While the queue needs more GPUs than are free, the first this many jobs of the queue get their GPU
# type and plan from one assignment (frenzy.sched.assignment); the matching costs O(n^2 x types) and,
# on the structured costs of positions, took ~0.2 ms at 48 jobs. On bench/sim_ablation.py's twelve
# runs over seeds 0-5 (mean cut vs sia): 12 -> 27.7%, 16 -> 27.9%, 24 -> 28.2%, 32 -> 27.9%,
# 48 -> 27.9% (over seeds 0-2: 24 -> 28.0%, 32 -> 27.7%, 40 -> 28.2%, 48 -> 28.4%, 64 -> 27.4%,
# 96 -> 27.9%): flat, so the cheaper head. A bound on the matching's work rather than a tuned value:
# on bench/sim_generalise.py's design half 12 gave the same mean cut vs sia as 24 (29.2% against
# 29.3%) with GPU-hours within +5% of sia's in 20 runs against 23.
ASSIGNED_JOBS = 24
ORDERS = ("work", "hrrn", "fifo")


def _fewest_of(job: QueuedJob) -> tuple:
    return step_seconds(job)["fewest_by_type"]


def _split_step_s(job: QueuedJob, choice: PlanChoice, nodes: int) -> float:
    """Predicted seconds per step of `choice` spread over `nodes` nodes (its data-parallel traffic
    crosses the inter-node network)."""
    return step_time(job.spec, choice.plan, choice.gpu, nodes=nodes).total_s


def _spend(job: QueuedJob, choice: PlanChoice, run_s: float) -> float:
    """What the job's ranking weighs a placement that runs `run_s` by: the time, or for a job ranked
    by cost, the price of its GPU-hours."""
    return run_s if job.buys_time else run_s * choice.num_gpus * choice.gpu.price_per_gpu_hour_usd


def _same_head(a: tuple, b: tuple) -> bool:
    """Whether two (grids, steps, capacity) assignment inputs are the same: the same grid objects
    (one per job shape) in the same order, the same steps and capacity."""
    return len(a[0]) == len(b[0]) and all(x is y for x, y in zip(a[0], b[0])) and a[1] == b[1] and a[2] == b[2]


class _WaitingTypes:
    """The GPU types that jobs left waiting so far in a call have plans on. Each distinct plan list
    (jobs of one shape share theirs) is read once, and only when a type is asked about: with a
    thousand jobs waiting, reading every list as it is added cost more than the questions."""

    __slots__ = ("_seen", "_unread", "_types")

    def __init__(self):
        self._seen: dict[int, Sequence[PlanChoice]] = {}  # by id, each list kept referenced
        self._unread: list[Sequence[PlanChoice]] = []
        self._types: set[str] = set()

    def add(self, plans: Sequence[PlanChoice]) -> None:
        if id(plans) not in self._seen:
            self._seen[id(plans)] = plans
            self._unread.append(plans)

    def __contains__(self, gpu: str) -> bool:
        for plans in self._unread:
            self._types.update(c.gpu.name for c in plans)
        self._unread.clear()
        return gpu in self._types


@register("frenzy")
class HeterogeneityAwareScheduler:
    name = "frenzy"
    round_s = None  # event-driven: called on every arrival and completion

    def __init__(self, *, time_aware: bool = True, order: str = "work",
                 preempt: bool = True, elastic: bool = True,
                 requeue_slow: bool = True, assign_jobs: bool = True, price_splits: bool = True,
                 startup_estimate_s: float = STARTUP_ESTIMATE_S, grow_min_gain: float = 0.0, lean: bool = True):
        if order not in ORDERS:
            raise ValueError(f"order must be one of {', '.join(repr(o) for o in ORDERS)}, got '{order}'")
        if not grow_min_gain >= 0:
            raise ValueError(f"grow_min_gain is in restarts saved and must be >= 0, got {grow_min_gain}")
        self.time_aware, self.order = time_aware, order
        self.startup_estimate_s = startup_estimate_s
        self.preempt, self.elastic, self.grow_min_gain = preempt, elastic, grow_min_gain
        self.requeue_slow, self.assign_jobs, self.price_splits = requeue_slow, assign_jobs, price_splits
        self.lean = lean
        # A restart's cost: what a move must save (REQUEUE_MIN_GAIN of them to re-queue) and how long
        # a job runs before it may be stopped again (preempted, resized or moved).
        self._restart_s = startup_estimate_s + RESTORE_ESTIMATE_S
        self._requeue_gain_s = REQUEUE_MIN_GAIN * self._restart_s
        self._last_assignment: tuple = (None, [])  # (inputs, picks) of the last head assignment
        self._priced_plans: dict[tuple[int, int], tuple] = {}  # see _priced
        self._running = RunFacts(step_seconds, plan_options)  # the running jobs' facts, kept across calls

    def schedule(self, state: ClusterState, queue: Sequence[QueuedJob], now: float) -> list[Decision]:
        pool = FreePool(state)
        free = pool.totals  # free GPUs per type, as the call takes them
        releases = releases_of(state) if self.time_aware else None
        contended = len(queue) > 1 and self._demand(queue) > sum(pool.totals.values())
        if contended:
            queue = self._ordered(queue, now)
        movers = self._slow_runners(state, pool, releases, now)
        if movers:
            queue = self._ordered(list(queue) + [job for job, _, _ in movers.values()], now)
        decisions: list[Decision] = []
        hopeless: set[int] = set()  # plan lists with no plan fitting now: free GPUs only shrink in a call
        assigned: dict[str, list[PlanChoice]] = {}
        if contended and self.assign_jobs:
            queue, assigned = self._assigned(queue, movers, pool)
        profile = Profile(releases, pool, now) if releases is not None else None
        # held to a lean plan, a job widens later only by growth (elastic, needs predicted ends)
        demand = QueueDemand(queue, _fewest_of) if self.lean and self.elastic and releases is not None else None
        waiting: list[tuple[QueuedJob, Sequence[PlanChoice], float | None]] = []  # + finish if it waits
        waiting_types = _WaitingTypes()
        preempted: set[str] = set()  # running jobs stopped so far in the walk for a faster plan
        for job in queue:
            if demand is not None:
                demand.leave(job)
            if job.job_id in movers:
                if job.job_id not in preempted:  # stopped earlier in this call, it queues again instead
                    decisions += self._move_if_fits(job, movers[job.job_id], pool, profile, now)
                continue
            plans = assigned.get(job.job_id) or usable_plans(job)
            if id(plans) in hopeless:
                waiting.append((job, plans, None))
                waiting_types.add(plans)
                continue
            allowed = None if demand is None or job.job_id in assigned or not job.buys_time else \
                self._allowed(job, demand, pool)
            rank, allocation, run_now_s = self._first_now(job, plans, pool, allowed)
            if allocation is None and not any(free.get(c.gpu.name, 0) >= c.num_gpus for c in plans):
                hopeless.add(id(plans))
            wait = None
            if job.job_id in assigned:  # its plan is decided: no patience, it waits only for that plan
                if allocation is None and profile is not None:
                    wait = self._best_wait(job, plans[:1], pool, profile, now)
            elif releases is not None and not job.buys_time:  # plans ranked by cost
                # a plan best fit can only spread over more nodes than it needs runs (and bills) slower
                # there: its own unsplit room is worth waiting for too
                split = allocation is not None and len(allocation) > pool.fewest_nodes(plans[rank].gpu.name,
                                                                                        plans[rank].num_gpus)
                if rank > 0 or split:
                    wait = self._cheapest_wait(job, plans[:rank + 1] if split else plans[:rank], pool, profile, now)
            elif releases is not None and rank > 0 and job.buys_time:
                if allocation is None:
                    faster = plans[:rank]
                else:
                    faster = faster_plans(job, rank)  # plans is usable_plans(job): the job is not assigned
                wait = self._best_wait(job, faster if allowed is None else [c for c in faster if allowed(c)],
                                       pool, profile, now)
            # a job ranked by cost that can wait for a cheaper plan does; one ranked by time waits only
            # if that finishes sooner
            if allocation is not None and (wait is None or job.buys_time and
                                           self._finish_now_s(job, run_now_s, wait, pool, now,
                                                              demand, waiting_types) <= wait[0]):
                sooner = self._preempted_for_faster(state, pool, releases, job, plans, rank, run_now_s, now,
                                                    decisions) if rank > 0 and job.buys_time else []
                if sooner:
                    preempted.update(d.job_id for d in sooner if isinstance(d, Preempt))
                    decisions += sooner
                    continue
                choice = plans[rank]
                if profile is not None:
                    profile.take(choice.gpu.name, choice.num_gpus, now + run_now_s)
                pool.take(choice.gpu.name, allocation)
                decisions.append(Place(job_id=job.job_id, choice=choice, allocation=allocation))
                continue
            waiting.append((job, plans, None if wait is None else wait[0]))
            waiting_types.add(plans)
            if wait is not None:
                _, start, choice = wait
                profile.take(choice.gpu.name, choice.num_gpus, start + self._run_s(job, choice, pool))
        stopped = {d.job_id for d in decisions if isinstance(d, Preempt)}  # moved, or preempted for a faster plan
        # stopping others for a job is spending on its time: a job ranked by cost is not served so
        decisions += self._preemptions(state, pool, releases, [(job, plans, finish) for job, plans, finish in waiting
                                                               if job.buys_time], now, stopped)
        return decisions + self._resizes(state, pool, releases, waiting, decisions, now)

    def _assigned(self, queue: Sequence[QueuedJob], movers,
                  pool: FreePool) -> tuple[list[QueuedJob], dict[str, list[PlanChoice]]]:
        """The queue re-ordered for a contended call, and the plans each of its first ASSIGNED_JOBS
        jobs may take: the one the joint assignment gives it, then the narrower ones of its type
        (frenzy.sched.assignment.assign_head): the assigned jobs first, each type's pool in its
        order, then the rest of the queue."""
        types = tuple(sorted(pool.capacity))
        head, grids = [], []
        for job in queue:
            if len(head) == ASSIGNED_JOBS:
                break
            grid = None if job.job_id in movers else plan_grid_of(job, types)
            if grid is None or not any(grid[1]) or not job.buys_time:
                continue  # a mover, a job with no usable plan, or one whose plans are ranked by cost
            head.append(job)
            grids.append(grid)
        # The assignment depends only on the head's shapes and steps: between events that leave the
        # head as it was (about a quarter of contended calls), the last one is reused. The key holds
        # the grids themselves, so their ids cannot be recycled while it is kept.
        key = (grids, [job.spec.steps for job in head], [pool.capacity[t] for t in types])
        last_key, picks = self._last_assignment
        if last_key is None or not _same_head(key, last_key):
            picks = assign_head(key[0], key[1], self.startup_estimate_s, key[2]) if head else []
            self._last_assignment = (key, picks)
        assigned = {job.job_id: pick for job, pick in zip(head, picks) if pick is not None}
        first = sorted((job for job in head if job.job_id in assigned), key=lambda j: -assigned[j.job_id][1])
        return first + [j for j in queue if j.job_id not in assigned], \
            {job_id: plans for job_id, (plans, _) in assigned.items()}

    def _slow_runners(self, state: ClusterState, pool: FreePool, releases: Releases | None,
                      now: float) -> dict[str, tuple]:
        # A move needs GPUs free when the call starts (placements only take GPUs): with none, skip
        # the scan of the running jobs, which most calls on a busy cluster would pay for nothing.
        if not (self.requeue_slow and releases is not None and releases.ends) or \
                not any(n > 0 for n in pool.totals.values()):
            return {}
        return slow_runners(self._running, state, now, self._requeue_gain_s, min_run_s=self._restart_s)

    def _move_if_fits(self, job: QueuedJob, mover, pool: FreePool, profile: Profile | None,
                      now: float) -> list[Decision]:
        """Move a re-queued running job (`job.spec.steps`: the steps it has left) to the first of
        its faster plans that fits in the GPUs free now (its own are given back once it moves;
        counting them as free cost GPU-hours, docs/BENCHMARKS.md#sim-generalise); nothing if none
        does: it keeps running where it is."""
        _, run, faster = mover
        rank, allocation, run_s = self._first_now(job, faster, pool)
        if allocation is None:
            return []
        choice = faster[rank]
        pool.release(run)
        pool.take(choice.gpu.name, allocation)
        if profile is not None:
            profile.take(choice.gpu.name, choice.num_gpus, now + run_s)
        return [Preempt(job_id=job.job_id, reason=f"frenzy: moved to {choice.num_gpus} faster {choice.gpu.name}"),
                Place(job_id=job.job_id, choice=choice, allocation=allocation)]

    def _preemptions(self, state, pool: FreePool, releases: Releases | None, waiting, now: float,
                     stopped: set[str], priced=None) -> list[Decision]:
        """frenzy.sched.preemption.preemptions_for for `waiting` ((job, plans, finish if it waits)
        triples), never stopping a job in `stopped`; `priced` as there (default: each job's plans,
        kept across calls)."""
        if not (self.preempt and waiting and releases is not None and releases.ends):
            return []
        latest = {gpu: ends[-1] for gpu, ends in releases.ends.items()}
        return preemptions_for(state, pool, waiting, now, priced or partial(self._priced, pool=pool),
                               latest, stopped, unsplit=self.price_splits, restart_s=self._restart_s)

    def _preempted_for_faster(self, state, pool: FreePool, releases: Releases | None, job: QueuedJob,
                              plans: Sequence[PlanChoice], rank: int, run_now_s: float, now: float,
                              decided: list[Decision]) -> list[Decision]:
        """Preempt + Place decisions that start `job` now on a plan faster than plans[rank] (the
        first that fits) by stopping running jobs for it, as the preemption of a waiting job would
        (frenzy.sched.preemption); [] if none is worth it. Patience weighs waiting for a faster plan
        against starting on a slower one now, and without this a short job that fits on slow GPUs
        never waits, so it is never served by preempting the long jobs on the fast ones (sia,
        re-allocating every round, puts it there). A faster plan is worth a victim only where the
        time it saves the job exceeds what the victim loses: its restart, and at least the job's
        run there, for which it is queued again behind it. So with `fast` the faster plan's start-up
        + run: run_now_s - fast > restart + fast.

        A slow runner queued to move (frenzy.sched.elastic.slow_runners) is still a running job and
        may be a victim like any other (it then queues again instead of moving later in the walk).
        Sparing it, as before, pushed the preemption onto a shorter job that, queued again, stopped
        the spared job at once: on EF04 x testbed at load 2.0 a 3-minute job spared a long one on 4
        A100s (queued to move to 8) and stopped an 11-minute one, which then stopped the long one: two
        restarts where one would do. Mean cut vs sia, smallest cut, runs >= 15%, p99 no worse than
        sia's, GPU-hours within +5% of sia's, GPU-hours over all (bench/sim_generalise.py), sparing it
        -> not: design half, seeds 0-2, 168 runs: 29.3%, +1.8%, 138, 127, 67, 1.014x -> 29.9%, +3.9%,
        143, 126, 68, 1.021x; reporting half, seeds 0-2, 162 runs: 28.3%, -7.8%, 140, 123, 66, 1.028x
        -> 28.5%, -4.2%, 142, 123, 63, 1.031x; the held-out cluster bench/cluster_odd96.yaml, 22 runs:
        11.1%, -13.3%, 8, 11, 3, 1.14x -> 11.7%, -9.3%, 8, 13, 3, 1.15x."""
        if not (self.preempt and releases is not None and releases.ends):
            return []
        faster = [c for c in plans[:rank] if run_now_s > 2 * self._run_s(job, c, pool) + self._restart_s]
        if not faster:
            return []
        priced = (tuple(self._run_s(job, c, pool) for c in faster), self._priced(job, plans, pool)[1])
        return self._preemptions(state, pool, releases, [(job, faster, now + run_now_s)], now,
                                 {d.job_id for d in decided}, lambda j, p: priced)

    def _resizes(self, state, pool: FreePool, releases: Releases | None, waiting, decided,
                 now: float) -> list[Decision]:
        """Elastic shrink for jobs still waiting, then growth into GPUs nobody waits for."""
        if not (self.elastic and releases is not None and releases.ends):
            return []
        touched = {d.job_id for d in decided}
        # A job with no predicted start waits at most until every running job has ended.
        last_end = max(ends[-1] for ends in releases.ends.values())
        still = [(job, plans, last_end + self._run_s(job, plans[0], pool) if finish is None else finish)
                 for job, plans, finish in waiting if plans and job.job_id not in touched]
        if not still and all(n <= 0 for n in pool.totals.values()):
            return []  # nobody waits and no GPU is idle: the common case, kept cheap
        restart_s = self._restart_s
        # Shrinking serves types some waiting job lacks GPUs of; growing must save its restart (plus
        # grow_min_gain restarts: 0 unless set for an ablation).
        lists = {id(plans): plans for _, plans, _ in still}.values()  # jobs of one shape share a list
        short = {c.gpu.name for plans in lists for c in plans if c.num_gpus > pool.totals.get(c.gpu.name, 0)}
        resizable = resizable_jobs(self._running, state, now, touched, short, (1 + self.grow_min_gain) * restart_s,
                                   min_run_s=restart_s)
        if not resizable:
            return []
        decisions = shrink_for([w for w in still if w[0].buys_time], pool, resizable, now,
                               lambda j, c: self._run_s(j, c, pool), restart_s)
        started = {d.job_id for d in decisions}
        lists = {id(plans): plans for job, plans, _ in still if job.job_id not in started}.values()
        wanted = {c.gpu.name for plans in lists for c in plans}
        split_step_s = _split_step_s if self.price_splits else None
        return decisions + grow_into_idle(pool, resizable, wanted, restart_s, self.grow_min_gain, split_step_s)

    # ---- pieces -----------------------------------------------------------------------------

    def _run_s(self, job: QueuedJob, choice: PlanChoice | None, pool: FreePool) -> float:
        """Predicted start-up + run on `choice` (None: on the job's fastest plan)."""
        seconds = step_seconds(job)["fastest"] if choice is None else step_seconds(job).get(id(choice))
        if seconds is None:  # not one of the job's own plan objects
            return self.startup_estimate_s + duration_s(job.spec, choice, pool.widest.get(choice.gpu.name))
        return self.startup_estimate_s + job.spec.steps * seconds

    def _priced(self, job: QueuedJob, plans: Sequence[PlanChoice], pool: FreePool) -> tuple:
        """(predicted start-up + run on each of `plans`, per GPU type that on the job's fastest plan
        there), kept per (job, plan list) across calls: preemption prices the waiting jobs' plans
        on most calls of a busy cluster, and a waiting job's steps do not change while it waits."""
        key = (id(job), id(plans))
        entry = self._priced_plans.get(key)
        if entry is not None and entry[0] is job and entry[1] is plans:
            return entry[2]
        startup, steps = self.startup_estimate_s, job.spec.steps
        priced = (tuple(self._run_s(job, c, pool) for c in plans),
                  {gpu: startup + steps * seconds for gpu, seconds in step_seconds(job)["fastest_by_type"].items()})
        if len(self._priced_plans) > 20_000:  # entries of jobs long placed
            self._priced_plans.clear()
        self._priced_plans[key] = (job, plans, priced)  # both kept referenced: their ids stay theirs
        return priced

    def _finish_now_s(self, job: QueuedJob, run_now_s: float, wait, pool: FreePool, now: float,
                      demand: QueueDemand | None, waiting_types: _WaitingTypes) -> float:
        """Predicted finish if the job starts now on a plan that takes `run_now_s` (start-up
        included) on the GPUs it would get: it runs there to the end, or, when
        the faster plan it could wait for frees (`wait` = (finish, start, plan)), moves to it by a
        checkpoint-restart with the steps it has left, whichever ends sooner. Counting the move
        keeps a long job from idling while the GPUs it waits for are still busy: it makes progress
        on what is free and moves later. The move is counted only where HAS would make it
        (frenzy.sched.elastic): by growth, if no other job of the call wants the faster plan's GPU
        type (none behind in the queue needs it, per the lean rule's `demand`, which exists only
        where growth runs; none ahead was left waiting with a plan there, `waiting_types`) and the
        move saves more than its restart; otherwise by the re-queue of slow runners, if that is on,
        the faster plan is at least REQUEUE_MIN_SPEEDUP x faster and it saves REQUEUE_MIN_GAIN
        restarts of what is left then. Counting any faster plan, as before, started jobs on slow GPUs (L40S for
        an A100, 1.8x slower) on the promise of a move that never came."""
        _, start, later = wait
        compute_now = run_now_s - self.startup_estimate_s
        finish = now + self.startup_estimate_s + compute_now
        left = 1.0 - max(0.0, start - now - self.startup_estimate_s) / max(compute_now, 1e-9)
        if left <= 0:
            return finish
        compute_later = self._run_s(job, later, pool) - self.startup_estimate_s
        saved = left * (compute_now - compute_later)
        gpu = later.gpu.name
        if demand is not None and not demand.needs.get(gpu, 0) and gpu not in waiting_types:
            moves = saved > self._restart_s  # the growth pass would move it
        else:
            moves = self.requeue_slow and compute_later * REQUEUE_MIN_SPEEDUP <= compute_now and \
                saved >= self._requeue_gain_s
        if not moves:
            return finish  # no move would be made: it runs here to the end
        moved = start + self.startup_estimate_s + RESTORE_ESTIMATE_S + left * compute_later
        return min(finish, moved)

    @staticmethod
    def _allowed(job: QueuedJob, demand: QueueDemand, pool: FreePool):
        """Whether the job may take a plan: its leanest of a type, or wider into GPUs nobody left in
        the queue needs (frenzy.sched.lean)."""
        lean = step_seconds(job)["lean_plans"]
        return lambda c: demand.allows(c, lean, pool)

    def _first_now(self, job, plans, pool: FreePool, allowed=None):
        """(rank, allocation, predicted start-up + run there) of the first plan that fits now
        (and that `allowed` allows, if given); (len(plans), None, None) if none does.

        Where only parts of nodes are free, best fit may spread a plan over more nodes than it
        needs, and its data-parallel traffic then crosses the inter-node network (a 4 + 4 split of
        an 8-GPU plan ran up to 2.6x slower per step on sia-64). Such a split is priced at its real
        step time and taken only if that still beats the next plan in the list that fits on as few
        nodes as it needs (in time, or for a job ranked by cost, in the price of its GPU-hours)."""
        split = None
        free = pool.totals
        for rank, choice in enumerate(plans):
            gpu = choice.gpu.name
            if free.get(gpu, 0) < choice.num_gpus or (allowed is not None and not allowed(choice)):
                continue
            allocation = pool.find(gpu, choice.num_gpus, choice.plan.tp)
            if allocation is None:
                continue
            if not self.price_splits or len(allocation) <= pool.fewest_nodes(gpu, choice.num_gpus):
                run_s = self._run_s(job, choice, pool)
                if split is not None and _spend(job, plans[split[0]], split[2]) <= _spend(job, choice, run_s):
                    return split
                return rank, allocation, run_s
            if split is None:
                split = (rank, allocation,
                         self.startup_estimate_s + job.spec.steps * _split_step_s(job, choice, len(allocation)))
        return split if split is not None else (len(plans), None, None)

    def _cheapest_wait(self, job, cheaper, pool: FreePool, profile: Profile, now: float):
        """(finish, start, plan) of the cheapest of `cheaper` (in cost order) the job could start
        later (frenzy.sched.profile); None if none will free. A job ranked by cost waits for it
        however long: what it buys is the cheapest run."""
        for choice in cheaper:
            wait = self._best_wait(job, [choice], pool, profile, now)
            if wait is not None:
                return wait
        return None

    def _best_wait(self, job, faster, pool: FreePool, profile: Profile, now: float):
        """(finish, start, plan) of the plan, among those faster than the one available now, that
        would finish soonest if the job waited for its GPUs; None if none would. Where enough GPUs
        are free now but the job could not take them (they lie split over nodes), the plan starts
        once running jobs free room for it on as few nodes as it needs; without that a job would
        wait for GPUs the availability profile counts as free, however long the split lasts."""
        best = None
        for choice in faster:
            start = profile.time_free(choice.gpu.name, choice.num_gpus)
            if start is not None and start <= now and self.price_splits:  # free in number, not for this job
                start = self._unsplit_start(choice, pool, profile.releases, now)
            if start is None:
                continue
            finish = start + self._run_s(job, choice, pool)
            if best is None or finish < best[0]:
                best = (finish, start, choice)
        return best

    @staticmethod
    def _unsplit_start(choice: PlanChoice, pool: FreePool, releases: Releases, now: float) -> float | None:
        """When the plan would first fit on as few nodes as it needs, as the running jobs of its
        type end and give their nodes' GPUs back; None if it fits so now (something else, the
        lean rule, kept the job off it) or never."""
        gpu = choice.gpu.name
        free = dict(pool.free[gpu])
        nodes = pool.fewest_nodes(gpu, choice.num_gpus)

        def fits_unsplit() -> bool:
            found = best_fit(free, choice.num_gpus, choice.plan.tp)
            return found is not None and len(found) <= nodes

        if fits_unsplit():
            return None
        for end, allocation in zip(releases.ends.get(gpu, ()), releases.allocations.get(gpu, ())):
            for name, gpus in allocation:
                free[name] += gpus
            if fits_unsplit():
                return max(end, now)
        return None

    @staticmethod
    def _demand(queue: Sequence[QueuedJob]) -> int:
        """GPUs the queue needs at the least: each job's smallest plan."""
        return sum(step_seconds(job)["min_gpus"] for job in queue)

    def _ordered(self, queue: Sequence[QueuedJob], now: float) -> Sequence[QueuedJob]:
        if self.order == "work":
            return by_work(queue, now, step_seconds)
        return by_response_ratio(queue, now, step_seconds) if self.order == "hrrn" else queue

"""Elastic resizing for HAS: shrink running jobs for a job that waits, grow them into idle GPUs.

A job's plan list holds data-parallel scale-outs of the same layout (frenzy.sched.scaleout), so a
running job can move to more or fewer GPUs, or to another type, by a checkpoint-restart. On an idle cluster
HAS gives a job its fastest plan, often many GPUs; when later jobs arrive those GPUs are better
shared, and when jobs end the survivors can use what is left. Sia gets both by re-solving every
round; HAS resizes on events, and only where the predicted sum of JCTs falls, counting the
restart (start-up + checkpoint restore) that every resize costs:
  - shrink: a waiting job W takes GPUs that running jobs on its plan's type give back (each moving
    to a smaller plan of its own, at most MAX_SHRINK_SLOWDOWN x slower per step) when W's
    predicted finish improves by more than the victims' total slowdown (restart + remaining steps
    x step-time increase);
  - re-queue: a running job on a plan at least REQUEUE_MIN_SPEEDUP x slower per step than its
    fastest usable one (it started on what was free while faster GPUs were busy; HAS's patience
    counts on it moving once they free) queues again for the faster plans that save it at least
    REQUEUE_MIN_GAIN restarts, in the queue's order with the waiting jobs, and moves when one fits
    (`slow_runners`);
  - grow: GPUs of a type no waiting job can use go to running jobs (more GPUs of their type, or a
    faster type) whose remaining time drops by more than the restart the move costs, the largest
    saving per GPU of the new plan first. A bar of 3 restarts saved (chosen on the bench/sim_jct.py
    runs) was dropped on bench/sim_generalise.py's design half: 56 runs, mean cut vs sia over the
    jobs both finished 29.5% with it and 29.6% without, runs >= 15% 46 and 48, runs with p99 no
    worse than sia's 45 and 43.
A job is resized or re-queued only once its last (re)start is at least as long ago as a restart takes
(`min_run_s`: start-up + checkpoint restore), so it is not stopped before its first steps; twice
that was tried and not kept (frenzy.sched.preemption's docstring).
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

from frenzy.memory.plans import PlanChoice
from frenzy.sched.pool import FreePool
from frenzy.sched.runfacts import RunFact, RunFacts
from frenzy.sched.types import ClusterState, Decision, Place, Preempt, QueuedJob

# A shrink moves its victim to a plan at most this many times slower per step: a small step down
# frees GPUs for a waiting job at little cost, a deep cut (16 GPUs to 2) stakes a long job on the
# predicted gain of one short one. Chosen on bench/sim_ablation.py's twelve runs over seeds 0-2
# (mean cut vs sia: no shrinking 19.2%, at most 1.5x slower 20.5%, no cap 19.4%). Re-checked on
# bench/sim_generalise.py's design half (56 runs; HAS with lean plans also for preemption, a variant
# not kept): without the cap the mean cut vs sia fell from 24.1% to 19.6% and the runs >= 15% from
# 39 to 31, so a cap earns its place; no quantity of the job tells how far a prediction may be
# trusted, so the value stays the one chosen. Shrinking itself, ablated on bench/sim_generalise.py's
# design half over seeds 0-3 (224 runs; mean cut vs sia, smallest cut, runs >= 15%, p99 no worse than
# sia's, GPU-hours within +5% of sia's, GPU-hours over all): 30.0%, +5.0%, 189, 166, 88, 1.015x with
# it, 30.1%, +5.0%, 190, 169, 87, 1.020x without (run by run: cut +0.04 points, standard error 0.06;
# GPU-hours ratio +0.0024, standard error 0.0013): it earns no time, a little of the GPU-hours target,
# and stays. On the cluster outside both halves (bench/cluster_odd96.yaml), where short jobs arriving
# in bursts wait for 2-GPU jobs that a 2x slowdown would halve, a cap of 2.0 cut the mean cut vs sia
# from 12.8% to 5.2% (1.0, 1.2: 12.8%): such a shrink trades the victim's certain slowdown for a
# predicted wait.
MAX_SHRINK_SLOWDOWN = 1.5
# A running job re-queues for plans at least REQUEUE_MIN_SPEEDUP x faster per step than its current
# one that would save at least REQUEUE_MIN_GAIN restarts of its remaining time (~30 min). Before,
# a job put on slow GPUs moved only into GPUs no waiting job could use, which under contention
# meant rarely. The bar is higher than growth's: a move takes GPUs waiting jobs want, and short
# moves churned small jobs. On bench/sim_ablation.py's twelve runs over seeds 0-2 (mean cut vs sia;
# no re-queue 23.1%): gain 3 -> 24.2%, 10 -> 25.1%, 20 -> 25.2%, 40 -> 25.2%, 100 -> 24.9%; at
# gain 20, speed-up 1.5 -> 24.7%, 2 -> 25.2%, 3 -> 24.5% (the sweep applied the gain to the job's
# best plan; applied, as now, to each plan it may move to: 24.9%). A derived bar was tried on
# bench/sim_generalise.py's design half (56 runs, with the lean rule): move to any plan that saves
# more than the restart in no more GPU-seconds than the job takes where it is. It moved jobs more
# often (preemptions and moves 10,392 against 8,278) and did worse: mean cut vs sia 27.6% against
# 29.2%, p99 no worse than sia's in 38 runs against 41 (no re-queue at all: 26.7%, 40). So the
# two constants stay: a move takes GPUs that waiting jobs want, and only a large gain pays for that.
REQUEUE_MIN_SPEEDUP = 2.0
REQUEUE_MIN_GAIN = 20.0
MAX_SHRINKING_JOBS = 8  # waiting jobs served by shrinking per call: bounds work and churn


def resizable_jobs(facts: RunFacts, state: ClusterState, now: float, exclude: set[str], shrink_types: set[str],
                   min_saving_s: float, *, min_run_s: float) -> dict[str, list[RunFact]]:
    """Running jobs that may be resized now, by GPU type: those on `shrink_types`, and the others
    whose fastest plan would save at least `min_saving_s` of what they have left (growth pays its
    restart), each with its `steps_left` set for now. `facts` holds each running job's usable plans
    as (plan, GPUs, seconds per step); the current plan among them is never a move (no GPUs change)."""
    by_type: dict[str, list[RunFact]] = {}  # filled inline below: a call per job was a tenth of this function
    if shrink_types:
        for fact in facts.read(state):
            run = fact.run
            if fact.gpu in shrink_types and fact.buys_time and now - run.start_time_s >= min_run_s and \
                    run.job_id not in exclude:
                fact.steps_left = max(0.0, run.expected_end_s - now) / fact.step_s
                by_type.setdefault(fact.gpu, []).append(fact)
    # a job ranked by cost is neither shrunk (its restart is its cost) nor grown
    growing = facts.subset(state, ("grow", min_saving_s), _buys_time, now)
    ended = []
    for fact in growing:
        run = fact.run
        left_s = max(0.0, run.expected_end_s - now)
        if left_s * (1 - fact.fastest_s / fact.step_s) < min_saving_s:
            ended.append(fact)  # most running jobs stop here, and with less left later stay stopped
        elif fact.gpu not in shrink_types and now - run.start_time_s >= min_run_s and run.job_id not in exclude:
            fact.steps_left = left_s / fact.step_s
            by_type.setdefault(fact.gpu, []).append(fact)
    _drop(growing, ended)
    return by_type


def slow_runners(facts: RunFacts, state: ClusterState, now: float, min_gain_s: float, *,
                 min_run_s: float) -> dict[str, tuple]:
    """Running jobs (run `min_run_s` since their last start) with usable plans REQUEUE_MIN_SPEEDUP x
    faster per step that would cut their remaining time by at least `min_gain_s`, by job id: (the
    job re-queued for its remaining steps with its original submit time, the running job, those
    faster plans in the order `facts` lists them)."""
    out = {}
    slow = facts.subset(state, ("slow", min_gain_s), _slow, now)
    ended = []
    for fact in slow:
        run, step_s = fact.run, fact.step_s
        steps_left = (run.expected_end_s - now) / step_s
        if min_gain_s > 0 and steps_left * (step_s - fact.fastest_s) < min_gain_s:
            ended.append(fact)  # not even its fastest plan saves enough, nor will with fewer steps left
            continue
        if now - run.start_time_s < min_run_s:
            continue
        faster = [plan for plan, _, s in _requeue_options(fact) if steps_left * (step_s - s) >= min_gain_s]
        if faster:
            steps = max(1, round(steps_left))
            requeued = fact.memo.get("requeued")  # the same steps left as at an earlier call: the same job
            if requeued is None or requeued.spec.steps != steps:
                requeued = fact.memo["requeued"] = run.job.with_steps(steps)
            out[run.job_id] = (requeued, run, faster)
    _drop(slow, ended)
    return out


def _buys_time(fact: RunFact) -> bool:
    return fact.buys_time


def _slow(fact: RunFact) -> bool:
    """A job that buys time on a plan with a usable plan REQUEUE_MIN_SPEEDUP x faster per step."""
    return fact.buys_time and fact.fastest_s * REQUEUE_MIN_SPEEDUP <= fact.step_s


def _drop(facts: dict, ended: list) -> None:
    for fact in ended:
        del facts[fact]


def _move(pool: FreePool, job: RunFact, plan: PlanChoice):
    """Re-place `job` on `plan` in the pool (releasing its GPUs first); its new allocation, or None
    with the pool unchanged."""
    pool.release(job.run)
    allocation = pool.find(plan.gpu.name, plan.num_gpus, plan.plan.tp)
    if allocation is None:
        pool.take(job.run.choice.gpu.name, job.run.allocation)
        return None
    pool.take(plan.gpu.name, allocation)
    return allocation


def _undo(pool: FreePool, moved: list) -> None:
    for job, plan, allocation in reversed(moved):
        pool.give(plan.gpu.name, allocation)
        pool.take(job.run.choice.gpu.name, job.run.allocation)


def _resize(job: RunFact, plan: PlanChoice, allocation, why: str) -> list[Decision]:
    return [Preempt(job_id=job.run.job_id, reason=why),
            Place(job_id=job.run.job_id, choice=plan, allocation=allocation)]


def shrink_for(waiting: Sequence[tuple[QueuedJob, Sequence[PlanChoice], float]], pool: FreePool,
               resizable: dict[str, list[RunFact]], now: float,
               run_s: Callable[[QueuedJob, PlanChoice], float], restart_s: float) -> list[Decision]:
    """Decisions that start waiting jobs (in the order given) on GPUs freed by shrinking running
    jobs. `waiting` holds (job, plans, predicted finish if it keeps waiting)."""
    decisions: list[Decision] = []
    served = 0
    offers: dict[str, list] = {}  # per GPU type, the shrinks on offer (until one is taken)
    for job, plans, finish_if_waiting in waiting:
        if served >= MAX_SHRINKING_JOBS:
            break
        for choice in plans:
            gpu, need = choice.gpu.name, choice.num_gpus
            missing = need - pool.totals.get(gpu, 0)
            if missing <= 0 or not resizable.get(gpu):
                continue
            on_offer = offers.get(gpu)
            if on_offer is None:
                on_offer = offers[gpu] = _shrink_offers(resizable[gpu], restart_s)
            if missing > on_offer.most_freed:
                continue  # no shrinks on offer free enough: the most common reason, so tested first
            gain = finish_if_waiting - (now + run_s(job, choice))
            if gain <= restart_s or not on_offer.may_free(missing, gain):
                continue  # no gain to pay a restart with, or no shrinks on offer lose less than it
            moved = _shrink_victims(pool, on_offer, missing, gain)
            allocation = pool.find(gpu, need, choice.plan.tp) if moved else None
            if allocation is None:
                _undo(pool, moved)
                continue
            pool.take(gpu, allocation)
            for victim, plan, where in moved:
                resizable[gpu].remove(victim)
                decisions += _resize(victim, plan, where, f"frenzy: shrunk for {job.job_id}")
            del offers[gpu]
            decisions.append(Place(job_id=job.job_id, choice=choice, allocation=allocation))
            served += 1
            break
    return decisions


class _Offers(list):
    """The shrinks on offer for one GPU type, cheapest slowdown per freed GPU first: (loss per GPU,
    loss, GPUs freed, job id, job, plan); with what bounds any set of them, so that a waiting job they
    cannot serve is turned away without trying."""

    def __init__(self, offers: list):
        super().__init__(offers)
        most: dict[str, int] = {}
        for _, _, freed, job_id, _, _ in offers:
            most[job_id] = max(most.get(job_id, 0), freed)
        self.most_freed = sum(most.values())  # one offer per job: each its deepest shrink
        self.least_loss_per_gpu = offers[0][0] if offers else float("inf")

    def may_free(self, missing: int, gain: float) -> bool:
        """False where no offers freeing `missing` GPUs can lose less than `gain` in all: every
        offer loses at least the cheapest loss per GPU for each GPU it frees (the margin covers
        the rounding of the sums)."""
        return self.least_loss_per_gpu * missing < gain * (1 + 1e-9)


def _shrink_offers(candidates: list[RunFact], restart_s: float) -> _Offers:
    """Every smaller plan of the same type each candidate could move to, cheapest slowdown per
    freed GPU first, ties by job id: (loss per GPU, loss, GPUs freed, job id, job, plan)."""
    offers = []
    for job in candidates:
        for plan, freed, step_s in _shrink_moves(job):
            loss = restart_s + job.slowdown_s(step_s)
            offers.append((loss / freed, loss, freed, job.run.job_id, job, plan))
    offers.sort(key=lambda o: o[:4])
    return _Offers(offers)


def _shrink_moves(job: RunFact) -> list:
    """(plan, GPUs freed, s/step) of each smaller plan of the job's type at most MAX_SHRINK_SLOWDOWN
    x slower per step, in the options' order."""
    moves = job.memo.get("shrink")
    if moves is None:
        moves = job.memo["shrink"] = [
            (plan, job.gpus - gpus, step_s) for plan, gpus, step_s in job.options
            if job.gpus - gpus > 0 and plan.gpu.name == job.gpu and step_s <= MAX_SHRINK_SLOWDOWN * job.step_s]
    return moves


def _shrink_victims(pool: FreePool, offers: list, missing: int, gain: float):
    """Take offers in order (one per job) until `missing` GPUs are free while the total slowdown
    stays below `gain`; the (job, plan, allocation) moves made, or [] with the pool unchanged."""
    moved, used, freed_total, loss_total = [], set(), 0, 0.0
    for _, loss, freed, job_id, job, plan in offers:
        if job_id in used or loss_total + loss >= gain:
            continue
        allocation = _move(pool, job, plan)
        if allocation is None:
            continue
        moved.append((job, plan, allocation))
        used.add(job_id)
        freed_total, loss_total = freed_total + freed, loss_total + loss
        if freed_total >= missing:
            return moved
    _undo(pool, moved)
    return []


def _requeue_options(job: RunFact) -> list:
    """The options at least REQUEUE_MIN_SPEEDUP x faster per step than the job's plan, in order."""
    options = job.memo.get("requeue")
    if options is None:
        options = job.memo["requeue"] = [o for o in job.options if o[2] * REQUEUE_MIN_SPEEDUP <= job.step_s]
    return options


def _growth_moves(job: RunFact) -> tuple[list, float]:
    """The moves growth may offer `job`: (plan, its GPU type, GPUs, GPUs beyond those the job holds
    on that type (> 0), s/step) for each option faster per step than the job's plan (a plan no
    faster saves nothing to pay a restart with); and the fewest extra GPUs any of them needs."""
    moves = job.memo.get("grow")
    if moves is None:
        extras = ((plan, gpus, gpus - (job.gpus if plan.gpu.name == job.gpu else 0), step_s)
                  for plan, gpus, step_s in job.options if step_s < job.step_s)
        listed = [(plan, plan.gpu.name, gpus, extra, step_s) for plan, gpus, extra, step_s in extras if extra > 0]
        moves = job.memo["grow"] = (listed, min((move[3] for move in listed), default=math.inf))
    return moves


def grow_into_idle(pool: FreePool, resizable: dict[str, list[RunFact]], wanted_types: set[str],
                   restart_s: float, min_gain_restarts: float = 0.0,
                   split_step_s: Callable[[QueuedJob, PlanChoice, int], float] | None = None) -> list[Decision]:
    """Decisions that move running jobs to faster plans (more GPUs, or a faster type) on GPUs of
    types no waiting job can use, the largest time saved per GPU of the new plan first. Where the
    idle GPUs hold a plan only on more nodes than it needs, `split_step_s(job, plan, nodes)` prices
    its step there and the move is made only if it still saves enough (None: split-blind). Such
    moves ran 1.5x slower per step on average than the plan's own step time over bench/sim_jct.py's
    runs; pricing them raised the mean cut vs sia over bench/sim_ablation.py's twelve runs (over the
    jobs both finished) from 31.7% to 31.9% over seeds 0-5 and from 31.8% to 32.2% over held-out
    seeds 6-11."""
    idle = {gpu: n for gpu, n in pool.totals.items() if n > 0 and gpu not in wanted_types}
    if not idle:
        return []
    min_gain = min_gain_restarts * restart_s
    most_idle = max(idle.values())
    options = []
    for jobs in resizable.values():
        for job in jobs:  # (RunFact.slowdown_s inline: this loop sees every resizable job at every call)
            moves, fewest_extra = job.memo.get("grow") or _growth_moves(job)
            steps_left, step_s_now = job.steps_left, job.step_s
            if fewest_extra > most_idle or -(steps_left * (job.fastest_s - step_s_now)) - restart_s < min_gain:
                continue  # no move fits the idle GPUs, or no plan can save enough of what is left
            for plan, gpu, gpus, extra, step_s in moves:
                if extra <= idle.get(gpu, 0):
                    gain = -(steps_left * (step_s - step_s_now)) - restart_s
                    if gain >= min_gain:
                        options.append((-gain / gpus, job.run.job_id, job, plan))
    options.sort(key=lambda o: o[:2])
    decisions: list[Decision] = []
    moved: set[str] = set()
    for _, job_id, job, plan in options:
        if job_id in moved:
            continue
        allocation = _move(pool, job, plan)
        if allocation is None:
            continue
        nodes = len(allocation)
        if split_step_s is not None and nodes > pool.fewest_nodes(plan.gpu.name, plan.num_gpus) and \
                -job.slowdown_s(split_step_s(job.run.job, plan, nodes)) - restart_s < min_gain:
            _undo(pool, [(job, plan, allocation)])
            continue
        moved.add(job_id)
        decisions += _resize(job, plan, allocation, f"frenzy: moved to {plan.num_gpus} idle {plan.gpu.name}")
    return decisions

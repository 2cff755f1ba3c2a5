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
A job is resized or re-queued only once it has run, since its last (re)start, as long as the
restart that started it took (`min_run_s`: start-up + checkpoint restore), so no job spends more of
its time restarting than running.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from frenzy.memory.plans import PlanChoice
from frenzy.sched.pool import FreePool
from frenzy.sched.runfacts import run_facts
from frenzy.sched.types import ClusterState, Decision, Place, Preempt, QueuedJob, RunningJob

# A shrink moves its victim to a plan at most this many times slower per step: a small step down
# frees GPUs for a waiting job at little cost, a deep cut (16 GPUs to 2) stakes a long job on the
# predicted gain of one short one. Chosen on bench/sim_ablation.py's twelve runs over seeds 0-2
# (mean cut vs sia: no shrinking 19.2%, at most 1.5x slower 20.5%, no cap 19.4%). Re-checked on
# bench/sim_generalise.py's design half (56 runs; HAS with lean plans also for preemption, a variant
# not kept): without the cap the mean cut vs sia fell from 24.1% to 19.6% and the runs >= 15% from
# 39 to 31, so a cap earns its place; no quantity of the job tells how far a prediction may be
# trusted, so the value stays the one chosen.
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


@dataclass(slots=True)
class Resizable:
    run: RunningJob
    steps_left: float
    step_s: float
    gpus: int
    options: list[tuple[PlanChoice, int, float]]  # the job's usable plans: (plan, GPUs, s/step)
    fastest_s: float  # no option's step is faster: what any move can save at most per step

    def slowdown_s(self, step_s: float) -> float:
        """Extra seconds to finish at `step_s` per step instead of the current plan's, restart excluded."""
        return self.steps_left * (step_s - self.step_s)


def resizable_jobs(state: ClusterState, now: float, options_of: Callable[[QueuedJob], list],
                   seconds_of: Callable[[QueuedJob], dict], exclude: set[str], shrink_types: set[str],
                   min_saving_s: float, *, min_run_s: float) -> dict[str, list[Resizable]]:
    """Running jobs that may be resized now, by GPU type: those on `shrink_types`, and the others
    whose fastest plan would save at least `min_saving_s` of what they have left (growth pays its
    restart). `options_of(job)` lists the job's usable plans as (plan, GPUs, seconds per step); the
    current plan among them is never a move (no GPUs change)."""
    by_type: dict[str, list[Resizable]] = {}
    for run, step, fastest, options, gpu, buys_time in run_facts(state.running, seconds_of, options_of):
        if not buys_time or now - run.start_time_s < min_run_s or run.job_id in exclude:
            continue  # a job ranked by cost is neither shrunk (its restart is its cost) nor grown
        left_s = max(0.0, run.expected_end_s - now)
        if gpu not in shrink_types and left_s * (1 - fastest / step) < min_saving_s:
            continue  # most running jobs stop here
        by_type.setdefault(gpu, []).append(Resizable(run, left_s / step, step, run.choice.num_gpus, options, fastest))
    return by_type


def slow_runners(state: ClusterState, now: float, options_of: Callable[[QueuedJob], list],
                 seconds_of: Callable[[QueuedJob], dict], min_gain_s: float, *,
                 min_run_s: float) -> dict[str, tuple]:
    """Running jobs (run `min_run_s` since their last start) with usable plans REQUEUE_MIN_SPEEDUP x
    faster per step that would cut their remaining time by at least `min_gain_s`, by job id: (the
    job re-queued for its remaining steps with its original submit time, the running job, those
    faster plans in the order `options_of` lists them)."""
    out = {}
    for run, step_s, fastest, options, _, buys_time in run_facts(state.running, seconds_of, options_of):
        if fastest * REQUEUE_MIN_SPEEDUP > step_s or now - run.start_time_s < min_run_s \
                or not buys_time:  # a faster plan costs a cost job more
            continue  # cheap test first: no plan at all is fast enough
        steps_left = (run.expected_end_s - now) / step_s
        faster = [plan for plan, _, s in _options_below(options, step_s, REQUEUE_MIN_SPEEDUP)
                  if steps_left * (step_s - s) >= min_gain_s]
        if faster:
            out[run.job_id] = (run.job.with_steps(max(1, round(steps_left))), run, faster)
    return out


def _move(pool: FreePool, job: Resizable, plan: PlanChoice):
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


def _resize(job: Resizable, plan: PlanChoice, allocation, why: str) -> list[Decision]:
    return [Preempt(job_id=job.run.job_id, reason=why),
            Place(job_id=job.run.job_id, choice=plan, allocation=allocation)]


def shrink_for(waiting: Sequence[tuple[QueuedJob, Sequence[PlanChoice], float]], pool: FreePool,
               resizable: dict[str, list[Resizable]], now: float,
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
    loss, GPUs freed, key, job, plan); with what bounds any set of them, so that a waiting job they
    cannot serve is turned away without trying."""

    def __init__(self, offers: list):
        super().__init__(offers)
        most: dict[int, int] = {}
        for _, _, freed, key, _, _ in offers:
            most[key] = max(most.get(key, 0), freed)
        self.most_freed = sum(most.values())  # one offer per job: each its deepest shrink
        self.least_loss_per_gpu = offers[0][0] if offers else float("inf")

    def may_free(self, missing: int, gain: float) -> bool:
        """False where no offers freeing `missing` GPUs can lose less than `gain` in all: every
        offer loses at least the cheapest loss per GPU for each GPU it frees (the margin covers
        the rounding of the sums)."""
        return self.least_loss_per_gpu * missing < gain * (1 + 1e-9)


def _shrink_offers(candidates: list[Resizable], restart_s: float) -> _Offers:
    """Every smaller plan of the same type each candidate could move to, cheapest slowdown per
    freed GPU first: (loss per GPU, loss, GPUs freed, key, job, plan)."""
    offers = []
    for job in candidates:
        for plan, freed, step_s in _shrink_moves(job):
            loss = restart_s + job.slowdown_s(step_s)
            offers.append((loss / freed, loss, freed, id(job), job, plan))
    offers.sort(key=lambda o: o[:4])
    return _Offers(offers)


def _shrink_moves(job: Resizable) -> list:
    """(plan, GPUs freed, s/step) of each smaller plan of the job's type at most MAX_SHRINK_SLOWDOWN
    x slower per step, in the options' order."""
    here = job.run.choice.gpu.name
    return _per_options(job.options, ("shrink", job.step_s, here, job.gpus), lambda: [
        (plan, job.gpus - gpus, step_s) for plan, gpus, step_s in job.options
        if job.gpus - gpus > 0 and plan.gpu.name == here and step_s <= MAX_SHRINK_SLOWDOWN * job.step_s])


def _shrink_victims(pool: FreePool, offers: list, missing: int, gain: float):
    """Take offers in order (one per job) until `missing` GPUs are free while the total slowdown
    stays below `gain`; the (job, plan, allocation) moves made, or [] with the pool unchanged."""
    moved, used, freed_total, loss_total = [], set(), 0, 0.0
    for _, loss, freed, key, job, plan in offers:
        if key in used or loss_total + loss >= gain:
            continue
        allocation = _move(pool, job, plan)
        if allocation is None:
            continue
        moved.append((job, plan, allocation))
        used.add(key)
        freed_total, loss_total = freed_total + freed, loss_total + loss
        if freed_total >= missing:
            return moved
    _undo(pool, moved)
    return []


_BY_OPTIONS: dict[tuple, tuple] = {}


def _per_options(options: list, key: tuple, compute: Callable[[], list]) -> list:
    """compute(), kept per (options list, key): a running job is offered growth, shrinking and
    re-queue on most calls while its options and step stay the same. The entry keeps the list
    referenced, so its id cannot be reused."""
    cache_key = (id(options), *key)
    entry = _BY_OPTIONS.get(cache_key)
    if entry is None or entry[0] is not options:
        if len(_BY_OPTIONS) > 50_000:
            _BY_OPTIONS.clear()
        entry = _BY_OPTIONS[cache_key] = (options, compute())
    return entry[1]


def _options_below(options: list, step_s: float, speedup: float | None = None) -> list:
    """The options faster per step than `step_s` (a plan no faster saves nothing to pay a restart
    with), or with `speedup` at least that many times faster, in their order."""
    if speedup is None:
        return _per_options(options, ("below", step_s), lambda: [o for o in options if o[2] < step_s])
    return _per_options(options, ("below", step_s, speedup),
                        lambda: [o for o in options if o[2] * speedup <= step_s])


def _growth_moves(job: Resizable) -> list:
    """The moves growth may offer `job`: (plan, its GPU type, GPUs, GPUs beyond those the job holds
    on that type (> 0), s/step) for each option faster per step than the job's plan."""
    here = job.run.choice.gpu.name

    def moves() -> list:
        extras = ((plan, gpus, gpus - (job.gpus if plan.gpu.name == here else 0), step_s)
                  for plan, gpus, step_s in _options_below(job.options, job.step_s))
        return [(plan, plan.gpu.name, gpus, extra, step_s) for plan, gpus, extra, step_s in extras if extra > 0]
    return _per_options(job.options, ("grow", job.step_s, here, job.gpus), moves)


def grow_into_idle(pool: FreePool, resizable: dict[str, list[Resizable]], wanted_types: set[str],
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
    options = []
    for jobs in resizable.values():
        for job in jobs:
            if -job.slowdown_s(job.fastest_s) - restart_s < min_gain:
                continue  # no plan can save enough of what is left
            for plan, gpu, gpus, extra, step_s in _growth_moves(job):
                if extra <= idle.get(gpu, 0):
                    gain = -job.slowdown_s(step_s) - restart_s
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

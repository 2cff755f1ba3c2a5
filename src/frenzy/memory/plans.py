"""Enumerate the parallel plans of a job on every GPU type, keep those that fit, and offer a few.

This is the one planner: `frenzy plan`, `GET /v1/plans`, the control loop and the simulator all call
`plan_job`, with one fit rule (frenzy.memory.fit: required bytes plus the safety margin, and the
GPU's dtype support) and one rule for what the worker runs (frenzy.core.worker_support).

Memory does not depend on the GPU type, so each plan shape (GPU count, dp x tp x pp, sequence
parallelism, ZeRO stage, recomputation, micro-batch) is estimated once and then compared against
every type's capacity. For a shape, only the largest micro-batch that fits is kept (fewest
accumulation steps). Per GPU type the plans at the smallest GPU count that fits and at twice that
count are enumerated; of those the type offers the best plan at the smallest count and then up to
`faster` plans that the perf model predicts faster than it. Plans the worker does not run are
enumerated apart (they never displace a runnable one) and offered only when asked for, marked
with the reason. The order of the final list is the scheduler's priority order and comes from a
replaceable ranking function.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

from frenzy.core.errors import NoFeasiblePlanError
from frenzy.core.gpu import GpuType
from frenzy.core.job import JobSpec
from frenzy.core.model import ModelArch
from frenzy.core.plan import ParallelPlan, supports_fsdp_param_dtype
from frenzy.core.training import Recompute, ZeroStage
from frenzy.core.units import fmt_gib
from frenzy.core.worker_support import unsupported_reason
from frenzy.memory.estimate import estimate_at_peak
from frenzy.memory.fit import DEFAULT_SAFETY_MARGIN, check_margin, dtype_problem, usable_bytes
from frenzy.memory.precision_mode import Peak, leaner_peak, leaner_precision_mode, model_state_floor
from frenzy.memory.result import MemoryEstimate
from frenzy.perf.step import step_time

__all__ = ["DEFAULT_SAFETY_MARGIN", "DEFAULT_FASTER", "PlanChoice", "plan_job", "enumerate_plans", "check_plan",
           "usable_bytes", "leaner_precision_mode"]

DEFAULT_MAX_GPUS = 64
DEFAULT_FASTER = 2  # plans offered per GPU type beyond the one at the smallest GPU count
MAX_MICRO_BATCH = 64
MAX_TENSOR_PARALLEL = 8  # tensor parallelism stays inside a node's NVLink/PCIe domain


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanChoice:
    """A plan on one GPU type, with its predicted memory, how much room it leaves, and whether the
    training worker runs it (`unsupported`: None, or why not)."""

    gpu: GpuType
    plan: ParallelPlan
    memory: MemoryEstimate
    usable_bytes: int  # GPU memory less the safety margin (and the calibration factor)
    unsupported: str | None = None
    # Stored, not a property: the scheduler reads it in every inner loop.
    num_gpus: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "num_gpus", self.plan.num_gpus)

    @property
    def runnable(self) -> bool:
        return self.unsupported is None

    @property
    def headroom_bytes(self) -> int:
        """Bytes left free beyond the safety margin: usable bytes less the required bytes."""
        return self.usable_bytes - self.memory.required_bytes

    @property
    def headroom_fraction(self) -> float:
        return self.headroom_bytes / self.gpu.memory_bytes

    def to_json(self) -> dict:
        p = self.plan
        return {
            "gpu_type": self.gpu.name,
            "num_gpus": p.num_gpus,
            "dp": p.dp, "tp": p.tp, "pp": p.pp, "zero": int(p.zero),
            "micro_batch": p.micro_batch, "grad_accum": p.grad_accum,
            "recompute": p.recompute.name.lower(), "sequence_parallel": p.sequence_parallel,
            "mixed_precision": p.mixed_precision.value,
            "memory": self.memory.to_json(),
            "usable_bytes": self.usable_bytes,
            "headroom_bytes": self.headroom_bytes,
            "runnable": self.runnable,
            "not_runnable_reason": self.unsupported,
        }


RankKey = Callable[[PlanChoice], tuple]


def rank_by_gpus_then_headroom(choice: PlanChoice) -> tuple:
    """Fewest GPUs first, then the most memory headroom (the pre-performance-model order)."""
    return (choice.num_gpus, -choice.headroom_fraction, choice.gpu.name)


def _powers_of_two(limit: int) -> list[int]:
    return [1 << i for i in range(limit.bit_length()) if 1 << i <= limit]


def _splits_model(arch: ModelArch, tp: int) -> bool:
    """Whether tensor parallelism of degree tp can split the model: tp divides the heads and the
    MLP width, and the KV heads (or is a multiple of them: each KV head is then replicated)."""
    return arch.num_heads % tp == 0 and arch.intermediate_size % tp == 0 and \
        (arch.num_kv_heads % tp == 0 or tp % arch.num_kv_heads == 0)


PROFILED_WITHOUT_TP = ("planned without tensor parallelism: the family has no formula, so how its layers "
                      "shard is not known")
MLA_WITHOUT_TP = ("planned without tensor parallelism: multi-head latent attention keeps replicated latent "
                  "projections that a head split does not shard, and no traced rank validates a split")


def _tensor_degrees(job: JobSpec, per_node: int) -> list[int]:
    """tp must split the model (_splits_model) and fit in a node; a profiled family runs unsplit."""
    if job.model.profile_key or job.model.mla_kv_rank:
        return [1]
    return [t for t in _powers_of_two(min(per_node, 8)) if _splits_model(job.model, t)]


def plan_notes(job: JobSpec) -> list[str]:
    """What a user should know about how the job's plans were made."""
    if job.model.profile_key:
        return [f"{job.model.family}: memory from a traced per-layer profile; {PROFILED_WITHOUT_TP}"]
    if job.model.mla_kv_rank:
        return [f"{job.model.family}: {MLA_WITHOUT_TP}"]
    return []


def check_plan(job: JobSpec, plan: ParallelPlan) -> None:
    """Raise a ValueError that says what to change when `plan` cannot lay out `job`'s model (the
    planner itself only builds plans that can)."""
    arch, problems = job.model, []
    if plan.tp > 1 and arch.profile_key:
        problems.append(f"tp {plan.tp}: {arch.family} is {PROFILED_WITHOUT_TP}; use tp 1 with more data parallelism "
                        "or ZeRO")
    elif plan.tp > 1 and arch.mla_kv_rank:
        problems.append(f"tp {plan.tp}: {arch.family} is {MLA_WITHOUT_TP}; use tp 1 with more data parallelism "
                        "or ZeRO")
    elif plan.tp > 1 and not _splits_model(arch, plan.tp):
        problems.append(f"tp {plan.tp} does not split {arch.num_heads} heads / {arch.num_kv_heads} KV heads / "
                        f"MLP width {arch.intermediate_size}; use one of "
                        + ", ".join(str(t) for t in range(1, arch.num_heads + 1) if _splits_model(arch, t)))
    if plan.pp > arch.num_layers:
        problems.append(f"pp {plan.pp} is more stages than the model's {arch.num_layers} layers")
    if plan.sequence_parallel and job.seq_len % plan.tp:
        problems.append(f"sequence parallelism needs the sequence length ({job.seq_len}) divisible by tp {plan.tp}")
    if problems:
        raise ValueError("; ".join(problems))


def _shapes(job: JobSpec, num_gpus: int, max_tp: int, recompute: Sequence[Recompute],
            zero: Sequence[ZeroStage], max_micro_batch: int) -> Iterable[tuple[ParallelPlan, list[int]]]:
    """Plan shapes on `num_gpus` GPUs, each with its candidate micro-batches (ascending). Within a
    (tp, pp) split the leaner shapes come first: sequence parallelism (when tp divides the sequence)
    before none, then lower ZeRO stages and less recomputation."""
    for tp in _tensor_degrees(job, max_tp):
        for pp in _powers_of_two(min(job.model.num_layers, num_gpus // tp)):
            if num_gpus % (tp * pp):
                continue
            dp = num_gpus // (tp * pp)
            if job.global_batch % dp:
                continue
            per_rank = job.global_batch // dp
            micro = [m for m in _powers_of_two(min(per_rank, max_micro_batch)) if per_rank % m == 0]
            if pp > 1:  # 1F1B needs at least pp micro-batches in flight
                micro = [m for m in micro if per_rank // m >= pp]
            if not micro:
                continue
            for sp in ((True, False) if tp > 1 and job.seq_len % tp == 0 else (False,)):
                for stage in zero if dp > 1 else [ZeroStage.NONE]:
                    for rc in recompute:
                        plan = ParallelPlan(dp=dp, tp=tp, pp=pp, zero=stage, recompute=rc, sequence_parallel=sp,
                                            micro_batch=1, grad_accum=per_rank)
                        if stage is ZeroStage.OPTIMIZER and supports_fsdp_param_dtype(job.training, plan):
                            continue  # FSDP2 runs it as ZeRO-2 (memory.zero): the same plan twice
                        yield plan, micro


def _with_micro_batch(shape: ParallelPlan, micro: int) -> ParallelPlan:
    return shape.varied(micro_batch=micro, grad_accum=shape.micro_batch * shape.grad_accum // micro)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Search:
    """What one enumeration compares shapes against: per GPU type its capacity and GPU-count limit."""

    job: JobSpec
    types: tuple[GpuType, ...]
    capacity: dict[str, int]
    limit: dict[str, int]


def _search(job: JobSpec, gpus: Sequence[GpuType], max_gpus: int, available: Mapping[str, int] | None,
            margin: float, factors: Mapping[str, float] | None) -> _Search:
    check_margin(margin)
    factors = factors or {}
    types = tuple(g for g in gpus if dtype_problem(job.training, g) is None)
    limit = {g.name: min(max_gpus, available.get(g.name, 0)) if available is not None else max_gpus for g in types}
    return _Search(job=job, types=types, limit=limit,
                   capacity={g.name: usable_bytes(g, margin, factors.get(g.name, 1.0)) for g in types})


def _fitting(search: _Search, shape: ParallelPlan, micro: list[int], types: list[GpuType],
             best_micro: dict[tuple, int], runnable: bool) -> list[PlanChoice]:
    """The shape at the largest micro-batch that fits each type, unless a leaner shape of the same
    split (tp, pp, runnable or not) already fits that type with a micro-batch at least as large.
    Required bytes grow with the micro-batch, so each type bisects `micro` (ascending) on the
    required bytes of each micro-batch's peak; the peaks are shared between types, and a
    MemoryEstimate is built once per micro-batch some type keeps."""
    job, capacity = search.job, search.capacity
    memo: dict[int, Peak] = {}
    kept: dict[int, tuple[MemoryEstimate, str | None]] = {}  # per micro-batch kept, shared between types

    def at(i: int) -> Peak:
        if i not in memo:
            memo[i] = leaner_peak(job, _with_micro_batch(shape, micro[i]))
        return memo[i]

    split, found = (runnable, shape.tp, shape.pp), []
    types = [g for g in types if best_micro.get((g.name, split), 0) < micro[-1]]
    if not types:  # a leaner shape already fits every type at the largest micro-batch: no estimate
        return found
    # The smallest micro-batch first: if it fits no type, the shape is out (one estimate).
    least = at(0)[3]
    for gpu in types:
        room = capacity[gpu.name]
        lo, hi, best = bisect_right(micro, best_micro.get((gpu.name, split), 0)), len(micro) - 1, None
        while least <= room and lo <= hi:
            mid = (lo + hi) // 2
            if at(mid)[3] <= room:
                best, lo = mid, mid + 1
            else:
                hi = mid - 1
        if best is None:
            continue
        plan, phase, parts, _ = at(best)
        if best not in kept:
            kept[best] = estimate_at_peak(plan, phase, parts), unsupported_reason(job, plan)
        memory, reason = kept[best]
        if (reason is None) != runnable:  # the worker's rule read the finished plan otherwise than its shape
            continue
        found.append(PlanChoice(gpu=gpu, plan=plan, memory=memory, usable_bytes=room, unsupported=reason))
        best_micro[(gpu.name, split)] = micro[best]
    return found


def enumerate_plans(job: JobSpec, gpus: Sequence[GpuType], *, max_gpus: int = DEFAULT_MAX_GPUS,
                    available: Mapping[str, int] | None = None, margin: float = DEFAULT_SAFETY_MARGIN,
                    factors: Mapping[str, float] | None = None, recompute: Sequence[Recompute] | None = None,
                    zero: Sequence[ZeroStage] | None = None, max_micro_batch: int | None = None,
                    include_unrunnable: bool = False) -> list[PlanChoice]:
    """Every fitting plan at each GPU type's smallest fitting count and twice it, unranked.

    `available`: GPUs of each type (a cluster's; None: any number up to `max_gpus`); `factors`: a
    calibration factor per type name (memory.fit.usable_bytes). Shapes the worker does not run
    are skipped before any estimate unless `include_unrunnable`."""
    search = _search(job, gpus, max_gpus, available, margin, factors)
    recompute = list(recompute or [Recompute.NONE, Recompute.FULL])
    zero = list(zero if zero is not None else ZeroStage)
    kinds = (True, False) if include_unrunnable else (True,)
    settled: dict[tuple[str, bool], int] = {}  # (GPU type, runnable) -> the smallest count that fit
    found: list[PlanChoice] = []
    floors: dict[tuple, int] = {}  # the floor depends on (tp, pp, dp, ZeRO), not on what varies within
    for count in _powers_of_two(max(search.limit.values(), default=0)):
        open_types = {kind: [g for g in search.types if count <= search.limit[g.name]
                             and settled.get((g.name, kind), count) >= count // 2] for kind in kinds}
        if not any(open_types.values()):
            break
        # A costlier shape is kept for a type only if it allows a larger micro-batch than a leaner one did.
        best_micro: dict[tuple, int] = {}
        room_for: dict[tuple, list[GpuType]] = {}  # (runnable, tp, floor) -> the open types with room
        widest = max(g.gpus_per_node for types in open_types.values() for g in types)
        for shape, micro in _shapes(job, count, min(widest, MAX_TENSOR_PARALLEL), recompute, zero,
                                    max_micro_batch or MAX_MICRO_BATCH):
            runnable = unsupported_reason(job, shape) is None
            if not open_types.get(runnable):  # a shape the worker does not run, unless asked for
                continue
            key = (shape.tp, shape.pp, shape.dp, shape.zero)
            if key not in floors:
                floors[key] = model_state_floor(job, shape)
            room_key = (runnable, shape.tp, floors[key])
            if room_key not in room_for:  # shared by the sequence-parallel and recomputation variants
                room_for[room_key] = [g for g in open_types.get(runnable, ())
                                      if g.gpus_per_node >= shape.tp and search.capacity[g.name] >= floors[key]]
            types = room_for[room_key]
            if types:
                new = _fitting(search, shape, micro, types, best_micro, runnable)
                for choice in new:
                    settled.setdefault((choice.gpu.name, runnable), count)
                found += new
    return found


def offered(job: JobSpec, found: Sequence[PlanChoice], rank: RankKey, faster: int) -> list[PlanChoice]:
    """Per GPU type (runnable and not apart): the best plan by `rank` at the smallest GPU count, then
    up to `faster` plans the perf model predicts faster than it, best by `rank` first. Ranked."""
    ranked = sorted(found, key=rank)  # each plan ranked once; a group keeps this order
    seconds = [step_time(job, c.plan, c.gpu).total_s for c in ranked]
    groups: dict[tuple[str, bool], list[int]] = {}
    for i, c in enumerate(ranked):
        groups.setdefault((c.gpu.name, c.runnable), []).append(i)
    kept = []
    for members in groups.values():
        fewest = min(ranked[i].num_gpus for i in members)
        first = next(i for i in members if ranked[i].num_gpus == fewest)
        kept += [first, *[i for i in members if seconds[i] < seconds[first]][:faster]]
    return [ranked[i] for i in sorted(kept)]


def plan_job(job: JobSpec, gpus: Sequence[GpuType], *, rank: RankKey = rank_by_gpus_then_headroom,
             faster: int = DEFAULT_FASTER, **search) -> list[PlanChoice]:
    """The plans offered for `job` on `gpus` (see the module docstring), ranked; NoFeasiblePlanError
    naming the smallest need and what would make it fit when none is. `search`: enumerate_plans'
    options (max_gpus, available, margin, factors, recompute, zero, max_micro_batch, include_unrunnable)."""
    if faster < 0:
        raise ValueError(f"faster must be >= 0, got {faster}")
    if not gpus:
        raise NoFeasiblePlanError("no GPU types to plan for; pass at least one GPU type")
    if all(dtype_problem(job.training, g) for g in gpus):
        raise NoFeasiblePlanError(
            f"{job.training.precision.value} needs bf16, which none of {', '.join(g.name for g in gpus)} "
            "supports; use --precision fp16-mixed or fp32, or allow an Ampere-or-newer GPU type")
    choices = offered(job, enumerate_plans(job, gpus, **search), rank, faster)
    if choices:
        return choices
    if not search.get("include_unrunnable"):
        others = enumerate_plans(job, gpus, **dict(search, include_unrunnable=True))
        if others:
            best = min(others, key=rank)
            raise NoFeasiblePlanError(
                f"no plan the training worker runs fits {job.model.name}; {len(others)} plan(s) fit that it does "
                f"not run (e.g. {best.plan.describe()} on {best.gpu.name}: {best.unsupported}); "
                "`frenzy plan --all` lists them")
    raise NoFeasiblePlanError(_nothing_fits(job, gpus, search.get("max_gpus", DEFAULT_MAX_GPUS),
                                            search.get("margin", DEFAULT_SAFETY_MARGIN)))


def smallest_requirement(job: JobSpec, *, max_gpus: int = DEFAULT_MAX_GPUS) -> tuple[ParallelPlan, MemoryEstimate]:
    """The least per-GPU memory any plan the worker runs up to `max_gpus` GPUs needs (to explain
    infeasibility)."""
    best = None
    for count in _powers_of_two(max_gpus):
        for shape, micro in _shapes(job, count, MAX_TENSOR_PARALLEL, [Recompute.FULL], list(ZeroStage),
                                    MAX_MICRO_BATCH):
            if unsupported_reason(job, shape):
                continue
            plan, memory = leaner_precision_mode(job, _with_micro_batch(shape, micro[0]))
            if best is None or memory.required_bytes < best[1].required_bytes:
                best = (plan, memory)
    if best is None:
        raise NoFeasiblePlanError(
            f"global batch {job.global_batch} admits no data-parallel split up to {max_gpus} GPUs; "
            "use a global batch that is a multiple of a power of two"
        )
    return best


def _nothing_fits(job: JobSpec, gpus: Sequence[GpuType], max_gpus: int, margin: float) -> str:
    plan, memory = smallest_requirement(job, max_gpus=max_gpus)
    biggest = max(gpus, key=lambda g: g.memory_bytes)
    hints = []
    if job.training.method.value == "full":
        hints.append("use LoRA or QLoRA (--method lora)")
    if job.model.num_heads % 2 == 0:
        hints.append("allow more GPUs (--max-gpus) for more tensor/pipeline parallelism")
    hints.append("shorten the sequence or use a smaller micro-batch")
    needed = memory.required_bytes / (1 - margin)
    return (f"no allowed GPU type fits {job.model.name}: the smallest plan up to {max_gpus} GPUs "
            f"({plan.describe()}) needs {fmt_gib(memory.required_bytes)} per GPU "
            f"(+{margin:.0%} margin = {fmt_gib(needed)}), the largest allowed GPU ({biggest.name}) has "
            f"{fmt_gib(biggest.memory_bytes)}; " + "; ".join(hints) + ", or add a GPU type with "
            f">= {fmt_gib(needed, 0)}")

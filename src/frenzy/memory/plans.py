"""Enumerate the parallel plans of a job on every GPU type, keep those that fit, and rank them.

Memory does not depend on the GPU type, so each plan shape (GPU count, dp x tp x pp, ZeRO stage,
recomputation, micro-batch) is estimated once and then compared against every type's capacity.
For a shape, only the largest micro-batch that fits is kept (fewest accumulation steps); per GPU
type the plans at the smallest GPU counts that fit are kept. The order of the final list is the
scheduler's priority order and comes from a replaceable ranking function.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Sequence

from frenzy.core.errors import NoFeasiblePlanError
from frenzy.core.gpu import GpuType
from frenzy.core.job import JobSpec
from frenzy.core.model import ModelArch
from frenzy.core.plan import MixedPrecisionMode, ParallelPlan, supports_fsdp_param_dtype
from frenzy.core.training import Recompute, ZeroStage
from frenzy.core.units import fmt_gib
from frenzy.memory.estimate import estimate
from frenzy.memory.result import MemoryEstimate

DEFAULT_SAFETY_MARGIN = 0.05  # fraction of a GPU's memory left free beyond the predicted device bytes
DEFAULT_MAX_GPUS = 64
DEFAULT_PLANS_PER_TYPE = 3
MAX_MICRO_BATCH = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanChoice:
    """A plan on one GPU type, with its predicted memory and how much room it leaves."""

    gpu: GpuType
    plan: ParallelPlan
    memory: MemoryEstimate
    usable_bytes: int  # GPU memory minus the safety margin
    # Stored, not a property: the scheduler reads it in every inner loop.
    num_gpus: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "num_gpus", self.plan.num_gpus)

    @property
    def headroom_bytes(self) -> int:
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
            "headroom_bytes": self.headroom_bytes,
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
            zero: Sequence[ZeroStage], max_pp: int = 64,
            sequence_parallel: bool = True) -> Iterable[tuple[ParallelPlan, list[int]]]:
    """Plan shapes on `num_gpus` GPUs, each with its candidate micro-batches (largest first)."""
    for tp in _tensor_degrees(job, max_tp):
        for pp in _powers_of_two(min(job.model.num_layers, num_gpus // tp, max_pp)):
            if num_gpus % (tp * pp):
                continue
            dp = num_gpus // (tp * pp)
            if job.global_batch % dp:
                continue
            per_rank = job.global_batch // dp
            micro = [m for m in _powers_of_two(min(per_rank, MAX_MICRO_BATCH)) if per_rank % m == 0]
            if pp > 1:  # 1F1B needs at least pp micro-batches in flight
                micro = [m for m in micro if per_rank // m >= pp]
            if not micro:
                continue
            for stage in zero if dp > 1 else [ZeroStage.NONE]:
                for rc in recompute:
                    yield ParallelPlan(dp=dp, tp=tp, pp=pp, zero=stage, recompute=rc,
                                       sequence_parallel=sequence_parallel and tp > 1 and job.seq_len % tp == 0,
                                       micro_batch=1,
                                       grad_accum=per_rank), micro[::-1]


def _with_micro_batch(shape: ParallelPlan, micro: int) -> ParallelPlan:
    per_rank = shape.micro_batch * shape.grad_accum
    return ParallelPlan(dp=shape.dp, tp=shape.tp, pp=shape.pp, zero=shape.zero, recompute=shape.recompute,
                        sequence_parallel=shape.sequence_parallel, micro_batch=micro, grad_accum=per_rank // micro,
                        mixed_precision=shape.mixed_precision)


def leaner_precision_mode(job: JobSpec, plan: ParallelPlan) -> tuple[ParallelPlan, MemoryEstimate]:
    """`plan` in the mixed-precision mode that needs less memory, with its estimate. A bf16-mixed job
    on an FSDP2-sharded plan can run autocast or FSDP2's MixedPrecisionPolicy (fsdp2-param); one
    variant per plan is kept, the one with the lower required bytes (autocast on a tie), so the
    plan space does not double and the ranking compares plans, not precision modes."""
    memory = estimate(job, plan)
    if not supports_fsdp_param_dtype(job.training, plan):
        return plan, memory
    variant = replace(plan, mixed_precision=MixedPrecisionMode.FSDP2_PARAM)
    other = estimate(job, variant)
    return (variant, other) if other.required_bytes < memory.required_bytes else (plan, memory)


def usable_bytes(gpu: GpuType, margin: float) -> int:
    return int(gpu.memory_bytes * (1 - margin))


def enumerate_plans(job: JobSpec, gpus: Sequence[GpuType], *, max_gpus: int = DEFAULT_MAX_GPUS,
                    margin: float = DEFAULT_SAFETY_MARGIN, per_type: int = DEFAULT_PLANS_PER_TYPE,
                    recompute: Sequence[Recompute] | None = None, zero: Sequence[ZeroStage] | None = None,
                    max_tp: int = 8, max_pp: int = 64, sequence_parallel: bool = True,
                    rank: RankKey = rank_by_gpus_then_headroom) -> list[PlanChoice]:
    """All GPU types' best few fitting plans, ranked. Empty when nothing fits (see `plan_job`).

    `max_tp`, `max_pp` and `sequence_parallel` restrict the plan space to what an executor runs
    (Frenzy's worker has no pipeline stages and no sequence parallelism)."""
    if not 0 <= margin < 1:
        raise ValueError(f"safety margin must be in [0, 1), got {margin}")
    recompute = list(recompute or [Recompute.NONE, Recompute.FULL])
    zero = list(zero if zero is not None else ZeroStage)
    eligible = [g for g in gpus if g.supports_bf16 or not job.training.precision.needs_bf16]
    found: dict[str, list[PlanChoice]] = {g.name: [] for g in eligible}
    settled: dict[str, int] = {}  # GPU type -> the smallest count that fit
    capacity = {g.name: usable_bytes(g, margin) for g in eligible}
    for count in _powers_of_two(max_gpus):
        open_types = [g for g in eligible if settled.get(g.name, count) >= count // 2]
        if not open_types:
            break
        # Shapes come cheapest first (lower ZeRO stage, less recomputation); a costlier shape is
        # kept for a type only if it allows a larger micro-batch than a cheaper one already did.
        best_micro: dict[tuple, int] = {}
        widest = min(max_tp, max(g.gpus_per_node for g in open_types))
        for shape, micro in _shapes(job, count, widest, recompute, zero, max_pp, sequence_parallel):
            split = (shape.tp, shape.pp)
            # The smallest micro-batch first: if it fits no open type, the shape is out (one estimate).
            chosen = {micro[-1]: leaner_precision_mode(job, _with_micro_batch(shape, micro[-1]))}
            remaining = [g for g in open_types if g.gpus_per_node >= shape.tp
                         and chosen[micro[-1]][1].required_bytes <= capacity[g.name]]
            for mb in micro:  # largest first: each type keeps the largest micro-batch that fits it
                remaining = [g for g in remaining if best_micro.get((g.name, split), 0) < mb]
                if not remaining:
                    break
                if mb not in chosen:
                    chosen[mb] = leaner_precision_mode(job, _with_micro_batch(shape, mb))
                plan, memory = chosen[mb]
                for gpu in remaining:
                    if memory.required_bytes <= capacity[gpu.name]:
                        found[gpu.name].append(PlanChoice(gpu=gpu, plan=plan, memory=memory,
                                                          usable_bytes=capacity[gpu.name]))
                        settled.setdefault(gpu.name, count)
                        best_micro[(gpu.name, split)] = mb
    ranked = [c for choices in found.values() for c in sorted(choices, key=rank)[:per_type]]
    return sorted(ranked, key=rank)


def smallest_requirement(job: JobSpec, *, max_gpus: int = DEFAULT_MAX_GPUS) -> tuple[ParallelPlan, MemoryEstimate]:
    """The least per-GPU memory any plan up to `max_gpus` GPUs needs (to explain infeasibility)."""
    best = None
    for count in _powers_of_two(max_gpus):
        for shape, micro in _shapes(job, count, 8, [Recompute.FULL], list(ZeroStage)):
            plan, memory = leaner_precision_mode(job, _with_micro_batch(shape, micro[-1]))
            if best is None or memory.required_bytes < best[1].required_bytes:
                best = (plan, memory)
    if best is None:
        raise NoFeasiblePlanError(
            f"global batch {job.global_batch} admits no data-parallel split up to {max_gpus} GPUs; "
            "use a global batch that is a multiple of a power of two"
        )
    return best


def plan_job(job: JobSpec, gpus: Sequence[GpuType], **kwargs) -> list[PlanChoice]:
    """Ranked plans, or NoFeasiblePlanError naming the smallest need and what would make it fit."""
    if not gpus:
        raise NoFeasiblePlanError("no GPU types to plan for; pass at least one GPU type")
    if job.training.precision.needs_bf16 and not any(g.supports_bf16 for g in gpus):
        raise NoFeasiblePlanError(
            f"{job.training.precision.value} needs bf16, which none of {', '.join(g.name for g in gpus)} "
            "supports; use --precision fp16-mixed or fp32, or allow an Ampere-or-newer GPU type"
        )
    choices = enumerate_plans(job, gpus, **kwargs)
    if choices:
        return choices
    max_gpus = kwargs.get("max_gpus", DEFAULT_MAX_GPUS)
    plan, memory = smallest_requirement(job, max_gpus=max_gpus)
    margin = kwargs.get("margin", DEFAULT_SAFETY_MARGIN)
    biggest = max(gpus, key=lambda g: g.memory_bytes)
    hints = []
    if job.training.method.value == "full":
        hints.append("use LoRA or QLoRA (--method lora)")
    if job.model.num_heads % 2 == 0:
        hints.append("allow more GPUs (--max-gpus) for more tensor/pipeline parallelism")
    hints.append("shorten the sequence or use a smaller micro-batch")
    needed = memory.required_bytes / (1 - margin)
    raise NoFeasiblePlanError(
        f"no allowed GPU type fits {job.model.name}: the smallest plan up to {max_gpus} GPUs "
        f"({plan.describe()}) needs {fmt_gib(memory.required_bytes)} per GPU "
        f"(+{margin:.0%} margin = {fmt_gib(needed)}), the largest allowed GPU ({biggest.name}) has "
        f"{fmt_gib(biggest.memory_bytes)}; " + "; ".join(hints) + ", or add a GPU type with "
        f">= {fmt_gib(needed, 0)}"
    )

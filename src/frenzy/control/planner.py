"""Plan a request against the live cluster: MARP's ranked plans, cut to what the cluster and the
training worker can run, corrected by the calibration learnt from observed peaks."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

from frenzy.control.ports import NodeInfo
from frenzy.control.request import JobRequest
from frenzy.core import catalog
from frenzy.core.errors import NoFeasiblePlanError
from frenzy.core.gpu import GpuType
from frenzy.core.job import JobSpec
from frenzy.core.units import fmt_gib
from frenzy.core.worker_support import TENSOR_PARALLEL_FAMILIES, unsupported_reason
from frenzy.memory.plans import DEFAULT_SAFETY_MARGIN, PlanChoice, plan_job
from frenzy.memory.ranking import rank_key

MAX_PLANS = 12


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterShape:
    """GPU types present and how many of each, from the live nodes."""

    types: dict[str, GpuType]  # with gpus_per_node set to the largest node of that type
    total: dict[str, int]

    @classmethod
    def from_nodes(cls, nodes: Sequence[NodeInfo]) -> ClusterShape:
        types: dict[str, GpuType] = {}
        total: dict[str, int] = {}
        for node in nodes:
            if not node.alive or node.gpus < 1:
                continue
            name = node.gpu_type.name
            total[name] = total.get(name, 0) + node.gpus
            seen = types.get(name)
            widest = max(node.gpus, seen.gpus_per_node if seen else 0)
            # A plan may span any nodes of its type: it is predicted on their slowest link.
            network = min(node.gpu_type.inter_node_bandwidth_bytes_s,
                          seen.inter_node_bandwidth_bytes_s if seen else float("inf"))
            types[name] = replace(node.gpu_type, gpus_per_node=widest, inter_node_bandwidth_bytes_s=network)
        return cls(types=types, total=total)

    def signature(self) -> tuple:
        return tuple(sorted((n, t.memory_bytes, t.gpus_per_node, t.inter_node_bandwidth_bytes_s, self.total[n])
                            for n, t in self.types.items()))


def _allowed_types(request: JobRequest, shape: ClusterShape) -> list[GpuType]:
    if not shape.types:
        raise NoFeasiblePlanError("the cluster has no live GPU nodes; start one (see `frenzy ray-node-args`) "
                                  "or run `frenzy serve --fake-cluster`")
    if not request.limits.gpu_types:
        return list(shape.types.values())
    wanted = {catalog.gpu_type(name).name for name in request.limits.gpu_types}
    missing = wanted - set(shape.types)
    if missing == wanted:
        raise NoFeasiblePlanError(f"none of the allowed GPU types {sorted(wanted)} is in the cluster, which has "
                                  f"{sorted(shape.types)}; allow one of those in limits.gpu_types")
    return [shape.types[n] for n in sorted(wanted - missing)]


def runnable(choice: PlanChoice, spec: JobSpec, request: JobRequest, shape: ClusterShape) -> bool:
    """The worker runs the plan (frenzy.core.worker_support) and the cluster has its GPUs."""
    plan = choice.plan
    if unsupported_reason(spec, plan) or choice.num_gpus > shape.total.get(choice.gpu.name, 0):
        return False
    return request.micro_batch is None or plan.micro_batch <= request.micro_batch


def plan_request(request: JobRequest, spec: JobSpec, shape: ClusterShape,
                 factor_for: Callable[[str], float] = lambda _t: 1.0) -> list[PlanChoice]:
    """Ranked runnable plans; NoFeasiblePlanError saying what to change when there are none.

    A calibration factor f for a GPU type is folded into that type's safety margin, so MARP's
    enumeration itself moves on to plans with more headroom (more GPUs, ZeRO-3, recomputation).
    """
    types = _allowed_types(request, shape)
    rank = rank_key(request.objective, spec)
    limit = min(request.limits.max_gpus or 64, max(shape.total[t.name] for t in types))
    choices: list[PlanChoice] = []
    failures: list[str] = []
    for gpu in types:
        factor = factor_for(gpu.name)
        margin = 1 - (1 - DEFAULT_SAFETY_MARGIN) / factor
        try:
            found = plan_job(spec, [gpu], max_gpus=min(limit, shape.total[gpu.name]), margin=max(0.0, margin),
                             rank=rank, per_type=6, max_pp=1, sequence_parallel=False,
                             max_tp=8 if spec.model.family in TENSOR_PARALLEL_FAMILIES else 1)
        except NoFeasiblePlanError as exc:
            failures.append(str(exc))
            continue
        choices += [c for c in found if runnable(c, spec, request, shape)]
    if choices:
        return sorted(choices, key=rank)[:MAX_PLANS]
    raise NoFeasiblePlanError(_explain(spec, shape, types, failures))


def _explain(spec: JobSpec, shape: ClusterShape, types: list[GpuType], failures: list[str]) -> str:
    sizes = ", ".join(f"{shape.total[t.name]}x {t.name} ({fmt_gib(t.memory_bytes)})" for t in types)
    detail = failures[0] if failures else (
        "every plan that fits needs pipeline parallelism, tensor parallelism for a model family the worker "
        f"cannot split ({spec.model.family}), or more GPUs of a type than the cluster has")
    return (f"no plan for {spec.model.name} fits this cluster ({sizes}): {detail}. To make it fit: use "
            "method lora, a shorter seq_len or smaller global_batch, or add nodes with more GPU memory")

"""Plan a request against the live cluster: the one planner (memory.plans.plan_job) over the GPU
types and counts the live nodes have, corrected by the calibration learnt from observed peaks."""

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
from frenzy.memory.plans import PlanChoice, plan_job
from frenzy.memory.ranking import rank_key


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


def plan_request(request: JobRequest, spec: JobSpec, shape: ClusterShape,
                 factor_for: Callable[[str], float] = lambda _t: 1.0) -> list[PlanChoice]:
    """Ranked runnable plans (memory.plans.plan_job over the cluster's GPU types and counts);
    NoFeasiblePlanError saying what to change when there are none.

    A calibration factor f for a GPU type scales the bytes its plans need (memory.fit), so MARP's
    enumeration itself moves on to plans with more headroom (more GPUs, ZeRO-3, recomputation).
    """
    types = _allowed_types(request, shape)
    try:
        return plan_job(spec, types, rank=rank_key(request.objective, spec), max_gpus=request.limits.max_gpus or 64,
                        available={t.name: shape.total[t.name] for t in types},
                        factors={t.name: factor_for(t.name) for t in types}, max_micro_batch=request.micro_batch)
    except NoFeasiblePlanError as exc:
        raise NoFeasiblePlanError(_explain(spec, shape, types, str(exc))) from None


def _explain(spec: JobSpec, shape: ClusterShape, types: list[GpuType], detail: str) -> str:
    sizes = ", ".join(f"{shape.total[t.name]}x {t.name} ({fmt_gib(t.memory_bytes)})" for t in types)
    return (f"no plan for {spec.model.name} fits this cluster ({sizes}): {detail}. To make it fit: use "
            "method lora, a shorter seq_len or smaller global_batch, or add nodes with more GPU memory")

"""Cluster specs: node groups (GPU type, GPUs per node, host RAM, inter-node bandwidth) and counts.

YAML format (units in the key names):
    name: sia-64
    description: free text
    nodes:
      - gpu_type: T4-16G          # a catalog name (`frenzy gpus`), not an alias: 'a100' names four parts
        gpus_per_node: 4
        count: 6
        host_memory_gib: 192      # optional
        inter_node_gbit_s: 100    # optional, per node; default 200
        stands_for: T4            # optional: the source's name when a stand-in type is used
Built-in specs live in frenzy/sim/clusters/*.yaml and are loaded by name. A file is checked by a
pydantic model of it (`_ClusterFile`), the boundary where a file format is read.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from frenzy.core import catalog
from frenzy.core.errors import InvalidConfigError, UnknownNameError
from frenzy.core.gpu import DEFAULT_INTER_NODE_BANDWIDTH_BYTES_S, GpuType
from frenzy.core.names import YamlName
from frenzy.core.units import GiB
from frenzy.sched.types import NodeState

DEFAULT_INTER_NODE_GBIT_S = DEFAULT_INTER_NODE_BANDWIDTH_BYTES_S * 8 / 1e9  # the catalog's NIC unless a group says
# Ten times the largest clusters built so far (~100,000 GPUs): a bound on what one file may make the
# simulator allocate, not a limit any real cluster meets.
MAX_CLUSTER_GPUS = 1_000_000
_CLUSTERS = resources.files("frenzy.sim") / "clusters"  # package data, not a package


def gpu_name(name: str, where: str) -> str:
    """The catalog name of a GPU type named in a cluster file or a trace (`where` says which), or an
    error that says where it is and suggests the closest catalog names."""
    try:
        return catalog.catalog_gpu_name(name)
    except UnknownNameError as exc:
        raise InvalidConfigError(f"{where}: {exc} Clusters and traces name GPU types by their catalog name "
                                 "(`frenzy gpus` lists them); an alias such as 'a100' could mean several parts"
                                 ) from None


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeGroup:
    gpu_type: str  # canonical catalog name
    gpus_per_node: int
    count: int
    host_memory_bytes: int = 0
    inter_node_bandwidth_bytes_s: float = DEFAULT_INTER_NODE_GBIT_S * 1e9 / 8
    stands_for: str = ""

    def __post_init__(self):
        object.__setattr__(self, "gpu_type", gpu_name(self.gpu_type, "a cluster's node group"))
        if self.gpus_per_node < 1 or self.count < 1:
            raise ValueError(f"node group {self.gpu_type}: gpus_per_node and count must be >= 1")
        if self.inter_node_bandwidth_bytes_s <= 0:
            raise ValueError(f"node group {self.gpu_type}: inter-node bandwidth must be positive")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterSpec:
    name: str
    groups: tuple[NodeGroup, ...]
    description: str = ""

    def __post_init__(self):
        if not self.groups:
            raise ValueError(f"cluster {self.name} has no nodes; add at least one node group")
        if self.total_gpus > MAX_CLUSTER_GPUS:
            raise ValueError(f"cluster {self.name} has {self.total_gpus:,} GPUs; the simulator takes at most "
                             f"{MAX_CLUSTER_GPUS:,} (it keeps every node in memory)")

    @property
    def total_gpus(self) -> int:
        return sum(g.gpus_per_node * g.count for g in self.groups)

    def gpus_by_type(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for g in self.groups:
            out[g.gpu_type] = out.get(g.gpu_type, 0) + g.gpus_per_node * g.count
        return out

    def node_states(self) -> list[NodeState]:
        """One idle NodeState per node, named <type>-<index>, in group order."""
        nodes, seen = [], {}
        for g in self.groups:
            for _ in range(g.count):
                i = seen[g.gpu_type] = seen.get(g.gpu_type, -1) + 1
                nodes.append(NodeState(name=f"{g.gpu_type}-{i}", gpu_type=g.gpu_type, total_gpus=g.gpus_per_node,
                                       free_gpus=g.gpus_per_node,
                                       inter_node_bandwidth_bytes_s=g.inter_node_bandwidth_bytes_s))
        return nodes

    def gpu_types(self) -> list[GpuType]:
        """Catalog types present, each with gpus_per_node = its widest node here (bounds tensor
        parallel) and the slowest inter-node link among its nodes (collectives run at the slowest)."""
        widest: dict[str, int] = {}
        for g in self.groups:
            widest[g.gpu_type] = max(widest.get(g.gpu_type, 0), g.gpus_per_node)
        links = self.inter_node_bandwidth_by_type()
        return [replace(catalog.gpu_type(t), gpus_per_node=w, inter_node_bandwidth_bytes_s=links[t])
                for t, w in widest.items()]

    def inter_node_bandwidth_by_type(self) -> dict[str, float]:
        """The slowest inter-node link among each type's groups (collectives run at the slowest)."""
        out: dict[str, float] = {}
        for g in self.groups:
            out[g.gpu_type] = min(out.get(g.gpu_type, float("inf")), g.inter_node_bandwidth_bytes_s)
        return out

    def to_yaml(self) -> str:
        rows = []
        for g in self.groups:
            row = {"gpu_type": g.gpu_type, "gpus_per_node": g.gpus_per_node, "count": g.count}
            if g.host_memory_bytes:
                row["host_memory_gib"] = round(g.host_memory_bytes / GiB, 1)
            row["inter_node_gbit_s"] = round(g.inter_node_bandwidth_bytes_s * 8 / 1e9, 3)
            if g.stands_for:
                row["stands_for"] = g.stands_for
            rows.append(row)
        return yaml.safe_dump({"name": self.name, "description": self.description, "nodes": rows},
                              sort_keys=False, width=100)


class _GroupRow(BaseModel):
    """One node group as written in a cluster YAML (the module docstring has the format)."""

    model_config = ConfigDict(extra="forbid")
    gpu_type: YamlName
    gpus_per_node: int = Field(ge=1)
    count: int = Field(ge=1)
    host_memory_gib: float = Field(0.0, ge=0, allow_inf_nan=False)
    inter_node_gbit_s: float = Field(DEFAULT_INTER_NODE_GBIT_S, gt=0, allow_inf_nan=False)
    stands_for: YamlName = ""


class _ClusterFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Optional[YamlName] = None
    description: YamlName = ""
    nodes: list[_GroupRow] = Field(min_length=1)


def _problem(error: dict) -> str:
    """A pydantic error as 'where: what is wrong', in the file's own terms."""
    loc = error["loc"]
    where = f"node group {loc[1] + 1}" + (f", {loc[2]}" if len(loc) > 2 else "") \
        if len(loc) >= 2 and loc[0] == "nodes" and isinstance(loc[1], int) else ".".join(map(str, loc))
    if error["type"] == "extra_forbidden":
        allowed = _GroupRow.model_fields if len(loc) > 2 else _ClusterFile.model_fields
        return f"{where}: unknown key (allowed: {', '.join(allowed)})"
    return f"{where}: {error['msg'].lower()}"


def parse_cluster(data: object, default_name: str = "cluster", source: str = "") -> ClusterSpec:
    """A ClusterSpec from a cluster YAML's content; a ValueError naming every bad field."""
    origin = source or default_name
    if not isinstance(data, dict) or "nodes" not in data:
        raise ValueError(f"cluster {origin}: a cluster YAML needs a 'nodes:' list of {{gpu_type, gpus_per_node, "
                         "count}")
    try:
        spec = _ClusterFile.model_validate(data)
    except ValidationError as exc:
        raise ValueError(f"cluster {origin}: " + "; ".join(_problem(e) for e in exc.errors())) from None
    groups = tuple(NodeGroup(gpu_type=gpu_name(row.gpu_type, f"cluster {origin}, node group {i}"),
                             gpus_per_node=row.gpus_per_node, count=row.count,
                             host_memory_bytes=int(row.host_memory_gib * GiB),
                             inter_node_bandwidth_bytes_s=row.inter_node_gbit_s * 1e9 / 8, stands_for=row.stands_for)
                   for i, row in enumerate(spec.nodes, 1))
    return ClusterSpec(name=spec.name or default_name, groups=groups, description=spec.description)


def builtin_cluster_names() -> list[str]:
    return sorted(p.name[:-5] for p in _CLUSTERS.iterdir() if p.name.endswith(".yaml"))


@cache
def _builtin(name: str) -> ClusterSpec:
    text = (_CLUSTERS / f"{name}.yaml").read_text()
    return parse_cluster(yaml.safe_load(text), name)


def scale_cluster(spec: ClusterSpec, gpus: int) -> ClusterSpec:
    """A proportional miniature of `spec` with about `gpus` GPUs: each node group keeps its share of
    the GPUs (at least one node), so a trace can load a big cluster's mix at a smaller scale."""
    if gpus < 1:
        raise ValueError(f"a scaled cluster needs >= 1 GPU, got {gpus}")
    factor = gpus / spec.total_gpus
    groups = tuple(replace(g, count=max(1, round(g.count * factor))) for g in spec.groups)
    return ClusterSpec(name=f"{spec.name}@{gpus}", groups=groups,
                       description=f"{spec.description} (scaled to ~{gpus} GPUs)")


def load_cluster(name_or_path: str) -> ClusterSpec:
    """A built-in cluster by name (`name@N`: scaled to about N GPUs), or a YAML file by path."""
    if "@" in name_or_path and not Path(name_or_path).exists():
        name, _, size = name_or_path.rpartition("@")
        if not size.isdigit():
            raise ValueError(f"'{name_or_path}': the part after @ must be a GPU count, e.g. alibaba-openb@256")
        return scale_cluster(load_cluster(name), int(size))
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.exists():
            raise FileNotFoundError(f"cluster file {path} not found; pass a built-in name "
                                    f"({', '.join(builtin_cluster_names())}) or an existing YAML path")
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            raise ValueError(f"cluster file {path} is not valid YAML ({exc})") from None
        return parse_cluster(data, path.stem, str(path))
    names = builtin_cluster_names()
    if name_or_path not in names:
        raise UnknownNameError("cluster", name_or_path, difflib.get_close_matches(name_or_path, names, n=3),
                               list(names))
    return _builtin(name_or_path)

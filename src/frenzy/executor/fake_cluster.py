"""Fake-GPU mode: a local Ray cluster (ray.cluster_utils.Cluster, one raylet per node, all on
127.0.0.1) whose nodes advertise fake GPU types as custom resources and labels.

Each fake node can emulate a smaller card than its catalog type (like
`torch.cuda.set_per_process_memory_fraction` on a real GPU), so small models get the multi-GPU
plans a real cluster would give large ones. Workers run on CPU with the gloo backend.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from frenzy.core import catalog
from frenzy.core.units import GiB
from frenzy.executor import ray_env
from frenzy.executor.resources import gpu_resource, node_labels

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class FakeNode:
    name: str
    gpu_type: str  # canonical catalog name
    gpus: int
    memory_bytes: int  # per GPU, as emulated

    def __post_init__(self):
        if self.gpus < 1:
            raise ValueError(f"fake node {self.name}: gpus must be >= 1")


# The demo cluster: three GPU types, two of them without room for every job on one GPU.
PRESETS: dict[str, str] = {
    "demo": "A100-SXM-80G:2:6GiB,A10G-24G:4:3GiB,T4-16G:2:2GiB",
    "two-types": "A100-SXM-80G:2:6GiB,A10G-24G:2:3GiB",
}


def parse_nodes(text: str) -> list[FakeNode]:
    """`TYPE:GPUS[:MEMORY]` items, comma-separated (MEMORY like 3GiB or 1.5GiB), or a preset name."""
    text = PRESETS.get(text, text)
    nodes, seen = [], {}
    for item in (t.strip() for t in text.split(",") if t.strip()):
        parts = item.split(":")
        if len(parts) not in (2, 3) or not parts[1].isdigit():
            raise ValueError(f"fake node '{item}' is not TYPE:GPUS[:MEMORY], e.g. A10G-24G:4:3GiB; "
                             f"or use a preset: {', '.join(PRESETS)}")
        gpu = catalog.gpu_type(parts[0])
        memory = gpu.memory_bytes if len(parts) == 2 else _gib(parts[2])
        index = seen[gpu.name] = seen.get(gpu.name, -1) + 1
        slug = re.sub(r"[^a-z0-9]+", "-", gpu.name.lower()).strip("-")
        nodes.append(FakeNode(name=f"{slug}-{index}", gpu_type=gpu.name, gpus=int(parts[1]), memory_bytes=memory))
    if not nodes:
        raise ValueError("give at least one fake node")
    return nodes


def _gib(text: str) -> int:
    match = re.fullmatch(r"([0-9.]+)\s*GiB", text.strip(), re.I)
    if not match:
        raise ValueError(f"memory '{text}' must look like 3GiB or 1.5GiB")
    return int(float(match.group(1)) * GiB)


class FakeCluster:
    """Start with `start()`, stop with `stop()`: it kills exactly the Ray processes it started."""

    def __init__(self, nodes: list[FakeNode], cpus_per_gpu: int = 1):
        self.nodes = nodes
        self.cpus_per_gpu = cpus_per_gpu
        self._cluster = None

    @property
    def address(self) -> str:
        return self._cluster.address

    def start(self) -> str:
        ray_env.configure(fake_cluster=True)
        from ray.cluster_utils import Cluster

        # The head hosts the Frenzy attempt runners and Ray Train controllers (0 CPUs each), no GPUs.
        self._cluster = Cluster(initialize_head=True, head_node_args=dict(
            num_cpus=2, include_dashboard=False, labels={"frenzy.io/node": "head"}))
        for node in self.nodes:
            self._cluster.add_node(num_cpus=node.gpus * self.cpus_per_gpu,
                                   resources={gpu_resource(node.gpu_type): node.gpus},
                                   labels=node_labels(node.name, node.gpu_type, node.memory_bytes))
        self._cluster.wait_for_nodes()
        log.info("fake Ray cluster at %s: %s", self.address,
                 ", ".join(f"{n.name} ({n.gpus}x {n.gpu_type})" for n in self.nodes))
        return self.address

    def stop(self) -> None:
        if self._cluster is not None:
            self._cluster.shutdown()
            self._cluster = None

    def __enter__(self) -> FakeCluster:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

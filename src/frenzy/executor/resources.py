"""How a node tells Ray (and Frenzy) which GPUs it has: a custom resource per GPU type and labels.

Ray's own accelerator detection maps A100-40G and A100-80G to one name, so Frenzy never relies on
it: each node advertises `gpu_type:<canonical catalog name>` with its GPU count, and labels naming
the node, its GPU type, the memory each GPU really has (an emulated card may have less) and,
optionally, its network to other nodes in Gb/s (the catalog assumes 200): plans spanning nodes are
predicted on it, and a split placement priced with it (frenzy.perf.step_time).
"""

from __future__ import annotations

from dataclasses import replace

from frenzy.control.ports import NodeInfo
from frenzy.core import catalog

RESOURCE_PREFIX = "gpu_type:"
LABEL_NODE = "frenzy.io/node"
LABEL_GPU_TYPE = "frenzy.io/gpu-type"
LABEL_GPU_MEMORY = "frenzy.io/gpu-memory-bytes"
LABEL_NETWORK = "frenzy.io/inter-node-gbit-s"
NAMESPACE = "frenzy"


def gpu_resource(gpu_type: str) -> str:
    return RESOURCE_PREFIX + gpu_type


def node_labels(name: str, gpu_type: str, memory_bytes: int, inter_node_gbit_s: float | None = None) -> dict[str, str]:
    labels = {LABEL_NODE: name, LABEL_GPU_TYPE: gpu_type, LABEL_GPU_MEMORY: str(int(memory_bytes))}
    if inter_node_gbit_s is not None:
        labels[LABEL_NETWORK] = f"{network_gbit_s(inter_node_gbit_s, name):g}"
    return labels


def network_gbit_s(value, node: str) -> float:
    """A node's inter-node network in Gb/s, checked: a positive number."""
    try:
        gbit = float(value)
    except (TypeError, ValueError):
        gbit = float("nan")
    if not 0 < gbit < float("inf"):  # also refuses NaN
        raise ValueError(f"node {node}: inter-node network '{value}' must be a positive number of Gb/s, e.g. 100 "
                         f"(label {LABEL_NETWORK})")
    return gbit


def node_info(ray_node: dict) -> NodeInfo | None:
    """A `ray.nodes()` entry -> NodeInfo, or None for a node without Frenzy GPUs (e.g. the head)."""
    resources = ray_node.get("Resources") or {}
    labels = ray_node.get("Labels") or {}
    types = [(k[len(RESOURCE_PREFIX):], v) for k, v in resources.items() if k.startswith(RESOURCE_PREFIX)]
    if not types:
        return None
    if len(types) > 1:
        raise ValueError(f"node {labels.get(LABEL_NODE)} advertises several GPU types {types}; "
                         "give each node exactly one gpu_type:<name> resource")
    name, count = types[0]
    gpu = catalog.gpu_type(name)
    node_name = labels.get(LABEL_NODE) or ray_node.get("NodeID", "")[:12]
    memory = int(labels.get(LABEL_GPU_MEMORY) or gpu.memory_bytes)
    if memory != gpu.memory_bytes:
        gpu = replace(gpu, memory_bytes=memory)
    if LABEL_NETWORK in labels:
        gpu = replace(gpu, inter_node_bandwidth_bytes_s=network_gbit_s(labels[LABEL_NETWORK], node_name) * 1e9 / 8)
    return NodeInfo(name=node_name, gpu_type=gpu, gpus=int(count), alive=bool(ray_node.get("Alive")))

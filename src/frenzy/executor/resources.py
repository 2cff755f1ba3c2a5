"""How a node tells Ray (and Frenzy) which GPUs it has: a custom resource per GPU type and labels.

Ray's own accelerator detection maps A100-40G and A100-80G to one name, so Frenzy never relies on
it: each node advertises `gpu_type:<canonical catalog name>` with its GPU count, and labels naming
the node, its GPU type and the memory each GPU really has (an emulated card may have less).
"""

from __future__ import annotations

from dataclasses import replace

from frenzy.control.ports import NodeInfo
from frenzy.core import catalog

RESOURCE_PREFIX = "gpu_type:"
LABEL_NODE = "frenzy.io/node"
LABEL_GPU_TYPE = "frenzy.io/gpu-type"
LABEL_GPU_MEMORY = "frenzy.io/gpu-memory-bytes"
NAMESPACE = "frenzy"


def gpu_resource(gpu_type: str) -> str:
    return RESOURCE_PREFIX + gpu_type


def node_labels(name: str, gpu_type: str, memory_bytes: int) -> dict[str, str]:
    return {LABEL_NODE: name, LABEL_GPU_TYPE: gpu_type, LABEL_GPU_MEMORY: str(int(memory_bytes))}


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
    memory = int(labels.get(LABEL_GPU_MEMORY) or gpu.memory_bytes)
    if memory != gpu.memory_bytes:
        gpu = replace(gpu, memory_bytes=memory)
    node_name = labels.get(LABEL_NODE) or ray_node.get("NodeID", "")[:12]
    return NodeInfo(name=node_name, gpu_type=gpu, gpus=int(count), alive=bool(ray_node.get("Alive")))

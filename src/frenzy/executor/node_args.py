"""`frenzy ray-node-args`: the `ray start` flags that make this machine a Frenzy GPU node.

The GPU type comes from NVML's device name, mapped to the catalog through its aliases (each row
lists the exact string NVML prints), so an A100-40G and an A100-80G are told apart.
"""

from __future__ import annotations

import json
import shlex
import socket

from frenzy.core import catalog
from frenzy.core.errors import FrenzyError
from frenzy.executor.resources import gpu_resource, node_labels
from frenzy.train.config import CUDA_ALLOCATOR_CONF


class NoGpuError(FrenzyError):
    pass


def local_gpus() -> tuple[str, int, int]:
    """(NVML device name, count, memory bytes of GPU 0); NoGpuError without NVML or a GPU."""
    try:
        import pynvml
    except ImportError:
        raise NoGpuError("NVML is not available (pip install nvidia-ml-py on a GPU machine); on a machine "
                         "without GPUs use `frenzy serve --fake-cluster` instead") from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise NoGpuError(f"NVML found no NVIDIA driver ({exc}); run this on a GPU node, or use "
                         "`frenzy serve --fake-cluster` on a machine without GPUs") from None
    try:
        count = pynvml.nvmlDeviceGetCount()
        if count == 0:
            raise NoGpuError("NVML sees no GPU on this machine; run this on a GPU node")
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        name = pynvml.nvmlDeviceGetName(handle)
        name = name.decode() if isinstance(name, bytes) else name
        memory = int(pynvml.nvmlDeviceGetMemoryInfo(handle).total)
        return name, count, memory
    finally:
        pynvml.nvmlShutdown()


def ray_start_command(head_address: str, device_name: str, count: int, memory_bytes: int,
                      node_name: str | None = None, inter_node_gbit_s: float | None = None) -> str:
    gpu = catalog.gpu_type(device_name)
    name = node_name or socket.gethostname()
    labels = ",".join(f"{k}={v}" for k, v in node_labels(name, gpu.name, memory_bytes, inter_node_gbit_s).items())
    resources = json.dumps({gpu_resource(gpu.name): count})
    return (f"RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=~/.frenzy/ray_auth_token "
            f"PYTORCH_CUDA_ALLOC_CONF={CUDA_ALLOCATOR_CONF} ray start --address={head_address} "
            f"--num-gpus={count} --resources={shlex.quote(resources)} --labels={shlex.quote(labels)}")

"""FSDP2 inside the fake-tensor trace: the real `fully_shard` at world size dp on one process.

A "fake" process group (torch.testing's FakeStore, as torchtitan's memory estimation uses) gives
`fully_shard` a world of dp ranks whose collectives return at once, so the traced rank holds what
one rank of a dp-wide run holds: its DTensor parameter shards (the recorder counts their local
tensors), the bf16 all-gather buffers, the unsharded parameters FSDP2 builds from them and frees
by resizing their storage to 0, the fp32 reduce-scatter input and the sharded gradients.
What a CPU trace cannot show: CUDA-stream overlap, which on a GPU can keep a second layer's
all-gather buffers (the prefetch) and a reduce-scatter in flight beside the current layer's, and
NCCL's own buffers (MARP's runtime term).
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager

import torch
from torch import nn

from frenzy.core.plan import ParallelPlan
from frenzy.core.training import ZeroStage
from frenzy.memory.trace.patches import setattr_during
from frenzy.memory.trace.recorder import WEIGHTS, AllocationRecorder


@contextmanager
def fake_process_group(world: int):
    """The default process group as a fake one of `world` ranks, this process being rank 0; yields
    its 1-D device mesh (made outside the FakeTensorMode, which would fake the mesh's rank tensor)."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        raise RuntimeError("tracing an FSDP2 plan needs its own fake process group; one is already initialized")
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    try:
        yield init_device_mesh("cpu", (world,))
    finally:
        dist.destroy_process_group()


def shard(net: nn.Module, layers: nn.ModuleList, plan: ParallelPlan, mesh) -> None:
    """What the worker's `wrap_data_parallel` does in the fsdp2-param mode: each decoder layer and
    the root are FSDP2 units with MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32),
    resharding after forward under ZeRO-3 only."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    reshard = plan.zero >= ZeroStage.PARAMETERS
    for layer in layers:
        fully_shard(layer, mesh=mesh, reshard_after_forward=reshard, mp_policy=policy)
    fully_shard(net, mesh=mesh, reshard_after_forward=reshard, mp_policy=policy)


def local(tensor: torch.Tensor) -> torch.Tensor:
    """A DTensor's local shard (what its rank stores); any other tensor itself."""
    from torch.distributed.tensor import DTensor

    return tensor.to_local() if isinstance(tensor, DTensor) else tensor


@contextmanager
def following_resizes(target):
    """`UntypedStorage.resize_` calls (how FSDP2 frees and regrows unsharded parameters: not aten ops,
    so no dispatch mode sees them) reported to `target.resized(storage, bytes_before)`."""
    resize = torch.UntypedStorage.resize_

    def resize_(storage, size):
        before = storage.nbytes()
        out = resize(storage, size)
        target.resized(storage, before)
        return out

    with setattr_during(torch.UntypedStorage, "resize_", resize_):
        yield


@contextmanager
def recorded(recorder: AllocationRecorder):
    """Storage resizes reach the recorder, and what FSDP2 allocates to unshard a unit (the bf16
    casts of the shards, the flat all-gather buffer, the unsharded parameters) counts as weights."""
    from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup

    def as_weights(method):
        def run(self, *args, **kwargs):
            outer, recorder.role_override = recorder.role_override, WEIGHTS
            try:
                return method(self, *args, **kwargs)
            finally:
                recorder.role_override = outer
        return run

    with ExitStack() as stack:
        stack.enter_context(following_resizes(recorder))
        for name in ("unshard", "wait_for_unshard"):
            stack.enter_context(setattr_during(FSDPParamGroup, name, as_weights(getattr(FSDPParamGroup, name))))
        yield

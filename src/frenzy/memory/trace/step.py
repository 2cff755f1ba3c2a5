"""The training loop the tracer runs: two optimizer steps, each over `grad_accum` micro-batches.

The loop is the one Frenzy's training worker and HF Trainer run (bench/gpu_memory.py repeats it for
real GPUs; keep the two identical):

    for step in range(2):
        for _ in range(grad_accum):
            loss = model(input_ids=ids, labels=labels, use_cache=False).loss   # autocast for *-mixed
            loss.backward()
        optimizer.step(); optimizer.zero_grad(set_to_none=True)

`labels` is its own tensor with the first half of each sequence masked (-100), as a fine-tune's
prompt is: the masked-loss path the worker runs. The model output object is dropped at once, so the
16-bit logits it holds are not kept through backward. Step 2 is the one measured: the optimizer
state is alive from its start.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext

import torch
from torch import nn

from frenzy.core.training import Precision
from frenzy.memory.result import Phase
from frenzy.memory.trace.recorder import GRADIENTS, HOST, LOGITS_LOSS, OPTIMIZER_STATE, AllocationRecorder

STEPS = 2
MEASURED_STEP = STEPS - 1
LAYER_PRE, LAYER_POST = "layer_pre", "layer_post"


def autocast_for(precision: Precision):
    if precision is Precision.BF16_MIXED:
        return torch.autocast(device_type="cpu", dtype=torch.bfloat16)
    if precision is Precision.FP16_MIXED:
        return torch.autocast(device_type="cpu", dtype=torch.float16)
    return nullcontext()


@contextmanager
def forward_region(recorder: AllocationRecorder):
    """A forward that runs during backward is activation recomputation: its tensors are activations."""
    recomputing = recorder.phase is Phase.BACKWARD
    recorder.recompute_depth += recomputing
    try:
        yield
    finally:
        recorder.recompute_depth -= recomputing


def install_hooks(recorder: AllocationRecorder, layers: nn.ModuleList, params: list[nn.Parameter]) -> list:
    """Label recomputation, mark one middle layer's forward in the measured step, track grads."""
    handles = []
    middle = layers[len(layers) // 2]
    regions: list = []

    index = {id(layer): i for i, layer in enumerate(layers)}

    def pre(module, args):
        region = forward_region(recorder)
        region.__enter__()
        regions.append(region)
        _mark_layer(recorder, f"{LAYER_PRE}.{index[id(module)]}", f"{LAYER_POST}.{index[id(module)]}")
        if module is middle and _first_forward_of_measured_step(recorder):
            recorder.mark_event(LAYER_PRE)

    def post(module, args, output):
        _mark_layer(recorder, f"{LAYER_POST}.{index[id(module)]}", f"{LAYER_POST}.{index[id(module)]}")
        if module is middle and _first_forward_of_measured_step(recorder):
            recorder.mark_event(LAYER_POST)
        regions.pop().__exit__(None, None, None)

    for layer in layers:
        handles.append(layer.register_forward_pre_hook(pre))
        # always_call: non-reentrant checkpointing stops a re-run early by raising from inside it.
        handles.append(layer.register_forward_hook(post, always_call=True))
    for p in params:
        handles.append(p.register_post_accumulate_grad_hook(lambda p: recorder.mark(p.grad, GRADIENTS)))
    return handles


def _mark_layer(recorder: AllocationRecorder, name: str, done: str) -> None:
    """Mark layer i's edges in the first forward of the measured step (`layer_pre.i`, `layer_post.i`):
    the activations a layer keeps are the growth between them (frenzy.memory.trace.profile)."""
    if (recorder.step == recorder.measured_step and recorder.phase is Phase.FORWARD and recorder.recompute_depth == 0
            and done not in recorder.log.marks):
        recorder.mark_event(name)


def _first_forward_of_measured_step(recorder: AllocationRecorder) -> bool:
    return (recorder.step == recorder.measured_step and recorder.phase is Phase.FORWARD
            and recorder.recompute_depth == 0 and LAYER_POST not in recorder.log.marks)


def run_steps(model: nn.Module, optimizer: torch.optim.Optimizer, recorder: AllocationRecorder, *,
              precision: Precision, micro_batch: int, seq_len: int, grad_accum: int, vocab_size: int,
              host_state: frozenset[str], steps: int = STEPS, autocast: bool = True) -> None:
    """`steps` optimizer steps; the last one's forward is marked (a profile needs only one).
    `autocast=False`: FSDP2's MixedPrecisionPolicy hands the forward bf16 parameters instead."""
    recorder.measured_step = steps - 1
    recorder.set_phase(0, Phase.FORWARD)
    ids = torch.randint(0, vocab_size, (micro_batch, seq_len))
    labels = ids.clone()
    labels[:, : seq_len // 2] = -100
    for step in range(steps):
        for _ in range(grad_accum):
            recorder.set_phase(step, Phase.FORWARD)
            with autocast_for(precision) if autocast else nullcontext():
                loss = model(input_ids=ids, labels=labels, use_cache=False).loss
            recorder.mark(loss, LOGITS_LOSS)
            recorder.set_phase(step, Phase.BACKWARD)
            loss.backward()
            del loss
            _mark_gradients(recorder, model)
        recorder.set_phase(step, Phase.OPTIMIZER)
        optimizer.step()
        _mark_state(recorder, optimizer, host_state)
        optimizer.zero_grad(set_to_none=True)


def _local(tensor: torch.Tensor) -> torch.Tensor:
    """An FSDP2 DTensor's local shard, what its rank stores (any other tensor: itself)."""
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def _mark_gradients(recorder: AllocationRecorder, model: nn.Module) -> None:
    """FSDP2 sets each sharded gradient without AccumulateGrad, so no gradient hook sees it."""
    for p in model.parameters():
        if p.grad is not None:
            recorder.mark(_local(p.grad), GRADIENTS)


def _mark_state(recorder: AllocationRecorder, optimizer: torch.optim.Optimizer, host_state: frozenset[str]) -> None:
    for state in optimizer.state.values():
        for key, value in state.items():
            if isinstance(value, torch.Tensor):
                recorder.mark(_local(value), HOST if key in host_state else OPTIMIZER_STATE)

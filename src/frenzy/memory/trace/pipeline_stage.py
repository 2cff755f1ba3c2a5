"""One pipeline stage's training steps on fake tensors, in the order torch's Schedule1F1B runs them.

The training worker runs stages with torch.distributed.pipelining (frenzy.train.pipeline); a single
traced rank cannot run the schedule's communication, so this runs what the schedule does on stage s
of pp with m micro-batches, allocation for allocation:
  - at the first step, persistent receive buffers, one per micro-batch: the activations a later stage
    receives ([micro_batch, seq, hidden], the residual stream's dtype) and the output gradients an
    earlier stage receives (same shape);
  - warm-up: min(m, pp - s) forwards; then one backward and one forward in turn; then the remaining
    backwards. Each forward's output and input stay cached until its backward (the schedule's
    fwd_cache): on the first stage the hidden states sent on, on the last the logits;
  - a backward starts from the loss (last stage) or from the received output gradient, and leaves
    the input gradient (later stages) on the receive buffer until the next step clears it.
The stage model is the worker's own (frenzy.train.pipeline.keep_stage).
"""

from __future__ import annotations

import torch
from torch import nn

from frenzy.core.training import Precision
from frenzy.memory.result import Phase
from frenzy.memory.trace import step as trace_step
from frenzy.memory.trace.recorder import LOGITS_LOSS, AllocationRecorder


def one_f_one_b(micro_batches: int, stages: int, stage: int) -> list[tuple[str, int]]:
    """The (action, micro-batch) order of Schedule1F1B on `stage`: "F" forward, "B" backward."""
    warmup = min(micro_batches, stages - stage)
    order = [("F", i) for i in range(warmup)]
    forward, backward = warmup, 0
    while backward < micro_batches:
        order.append(("B", backward))
        backward += 1
        if forward < micro_batches:
            order.append(("F", forward))
            forward += 1
    return order


def make_stage(net: nn.Module, index: int, count: int, layers: range, precision: Precision):
    """Turn the whole traced model into the worker's stage `index` of `count` (same code path)."""
    from frenzy.train.pipeline import Stage, keep_stage

    stage = Stage(index=index, count=count, layers=layers)
    keep_stage(net, stage, lambda: trace_step.autocast_for(precision))
    return stage


def run_stage_steps(model: nn.Module, optimizer: torch.optim.Optimizer, recorder: AllocationRecorder, stage, *,
                    micro_batch: int, seq_len: int, grad_accum: int, vocab_size: int, hidden_size: int,
                    hidden_dtype: torch.dtype, host_state: frozenset[str], steps: int) -> None:
    from frenzy.train.pipeline import token_loss_sum

    recorder.measured_step = steps - 1
    recorder.set_phase(0, Phase.FORWARD)
    ids = torch.randint(0, vocab_size, (micro_batch, seq_len))
    labels = ids.clone()
    labels[:, : seq_len // 2] = -100
    shape = (micro_batch, seq_len, hidden_size)
    received = [] if stage.first else [torch.empty(shape, dtype=hidden_dtype).requires_grad_()
                                       for _ in range(grad_accum)]
    output_grads = [] if stage.last else [torch.empty(shape, dtype=hidden_dtype) for _ in range(grad_accum)]
    for step in range(steps):
        for buffer in received:  # the schedule's clear_runtime_states
            buffer.grad = None
        cache: dict[int, tuple] = {}
        for action, micro in one_f_one_b(grad_accum, stage.count, stage.index):
            if action == "F":
                recorder.set_phase(step, Phase.FORWARD)
                out = model(ids if stage.first else received[micro])
                loss = token_loss_sum(model, out, labels) if stage.last else None
                if loss is not None:
                    recorder.mark(loss, LOGITS_LOSS)
                cache[micro] = (out, loss)
                del out, loss
            else:
                recorder.set_phase(step, Phase.BACKWARD)
                out, loss = cache.pop(micro)
                if loss is not None:
                    loss.backward()
                else:
                    out.backward(output_grads[micro])
                del out, loss
                trace_step._mark_gradients(recorder, model)
        recorder.set_phase(step, Phase.OPTIMIZER)
        optimizer.step()
        trace_step._mark_state(recorder, optimizer, host_state)
        optimizer.zero_grad(set_to_none=True)

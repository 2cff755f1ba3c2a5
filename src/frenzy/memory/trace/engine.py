"""Where the autograd engine allocates differently for fake tensors than for CUDA tensors.

When a tensor receives several gradients (a residual stream, a tied embedding, RoPE's two paths),
the engine sums them in its InputBuffer. For a plain tensor that it holds the only reference to, it
adds in place (`old.add_(new)`); for a tensor subclass -- and FakeTensor is one -- it always adds
out of place (`old + new`, `can_accumulate_inplace` in torch/csrc/autograd/input_buffer.cpp), so
the trace would briefly hold one extra gradient-sized tensor at each such sum. For a tied
embedding of Llama-3 size that is 0.5 GiB at the backward peak that a GPU never allocates.

`fold_inplace_accumulations` rewrites the recorded stream as the GPU runs it: a backward `add`
whose operand is freed by the very next event (so the engine held its only reference) becomes an
in-place add into that operand -- no allocation, and the operand lives on with the sum's role.
"""

from __future__ import annotations

from bisect import bisect_left

from frenzy.memory.trace.recorder import EventLog


def fold_inplace_accumulations(log: EventLog) -> EventLog:
    """A copy of `log` with in-place-able gradient sums folded into their operands."""
    alias: dict[int, int] = {}  # folded sum -> operand that holds it on a GPU
    dropped: list[int] = []  # event positions removed (sorted)
    for position, event in enumerate(log.events[:-1]):
        result = event - 1
        if event <= 0 or result not in log.accumulations:
            continue
        freed = -log.events[position + 1] - 1
        if freed in log.accumulations[result] and log.sizes[freed] == log.sizes[result]:
            alias[result] = freed
            dropped += [position, position + 1]
    if not alias:
        return log

    def holder(alloc: int) -> int:
        while alloc in alias:
            alloc = alias[alloc]
        return alloc

    roles = list(log.roles)
    for result in alias:  # the sum's final role (e.g. a stolen gradient) goes to its holder
        roles[holder(result)] = log.roles[result]
    skip = set(dropped)
    events = [event if event > 0 else -(holder(-event - 1) + 1)
              for position, event in enumerate(log.events) if position not in skip]

    def shift(position: int) -> int:
        return position - bisect_left(dropped, position)

    return EventLog(
        sizes=log.sizes, roles=roles, events=events, origins=log.origins, accumulations=log.accumulations,
        marks={name: shift(p) for name, p in log.marks.items()},
        phase_starts=[(shift(p), step, phase) for p, step, phase in log.phase_starts],
        phase_positions={shift(p) for p in log.phase_positions},
    )

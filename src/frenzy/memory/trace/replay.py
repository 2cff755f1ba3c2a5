"""Turn a recorded event log into the numbers a GPU would report for the measured step.

Live bytes (sum of 512-rounded sizes) give `max_memory_allocated`; the same stream replayed through
the caching-allocator model gives `max_memory_reserved`. The breakdown by role is the one alive at
the allocated peak of the measured step.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from frenzy.memory.result import Phase
from frenzy.memory.trace.allocator import CachingAllocatorModel
from frenzy.memory.trace.recorder import HOST, EventLog

ROLES = ("weights", "gradients", "optimizer_state", "activations", "logits_loss", "temporaries")


@dataclass(frozen=True, slots=True, kw_only=True)
class Replay:
    peak_bytes: int  # max live bytes during the measured step
    peak_phase: Phase
    peak_breakdown: dict[str, int]  # live bytes per role at that peak
    peak_by_phase: dict[Phase, int]
    reserved_bytes: int  # allocator model, peak over the whole run (segments are never freed)
    allocator_allocated_bytes: int  # allocator model's block-level allocated peak (unsplit remainders)
    at_marks: dict[str, dict[str, int]]  # live bytes per role at each named mark


def replay(log: EventLog, measured_step: int) -> Replay:
    """Replay `log`; peaks are taken over the events of step `measured_step` (0-based)."""
    allocator = CachingAllocatorModel()
    blocks: dict[int, object] = {}
    by_role = dict.fromkeys(ROLES, 0)
    live = 0
    best = (-1, Phase.FORWARD, dict(by_role))
    by_phase: dict[Phase, int] = {}
    boundaries = [pos for pos, _, _ in log.phase_starts]
    marks = sorted((pos, name) for name, pos in log.marks.items())
    at_marks: dict[str, dict[str, int]] = {}
    next_mark = 0

    def sample(position: int) -> None:
        nonlocal best
        i = bisect.bisect_right(boundaries, position) - 1
        if i < 0:
            return
        _, step, phase = log.phase_starts[i]
        if step != measured_step:
            return
        by_phase[phase] = max(by_phase.get(phase, 0), live)
        if live > best[0]:
            best = (live, phase, dict(by_role))

    for position, event in enumerate(log.events):
        while next_mark < len(marks) and marks[next_mark][0] <= position:
            at_marks[marks[next_mark][1]] = dict(by_role)
            next_mark += 1
        if position in log.phase_positions:
            sample(position)
        alloc = abs(event) - 1
        role = log.roles[alloc]
        if role == HOST:
            continue
        size = log.sizes[alloc]
        if event > 0:
            live += size
            by_role[role] += size
            blocks[alloc] = allocator.malloc(size)
            sample(position)
        else:
            live -= size
            by_role[role] -= size
            allocator.free(blocks.pop(alloc))
    for _, name in marks[next_mark:]:
        at_marks[name] = dict(by_role)
    if len(log.events) in log.phase_positions:
        sample(len(log.events))  # a phase that ended the run without a single event
    if best[0] < 0:
        raise ValueError(f"the event log has no events in step {measured_step}")
    return Replay(
        peak_bytes=best[0],
        peak_phase=best[1],
        peak_breakdown=best[2],
        peak_by_phase=by_phase,
        reserved_bytes=allocator.peak_reserved_bytes,
        allocator_allocated_bytes=allocator.peak_allocated_bytes,
        at_marks=at_marks,
    )

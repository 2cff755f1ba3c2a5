"""Turn a recorded event log into the numbers a GPU would report for the measured step.

Live bytes (sum of 512-rounded sizes) give `max_memory_allocated`; the same stream replayed through
the caching-allocator model gives `max_memory_reserved`. Gradient sums the autograd engine does in
place on a GPU are folded first (engine.py). The breakdown by role is the one alive at
the allocated peak of the measured step.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from frenzy.memory.result import Phase
from frenzy.memory.trace.allocator import CachingAllocatorModel
from frenzy.memory.trace.engine import fold_inplace_accumulations
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


class _Peaks:
    """Running live bytes per role, and their maxima within the measured step."""

    def __init__(self, log: EventLog, measured_step: int) -> None:
        self.log, self.measured_step = log, measured_step
        self.boundaries = [position for position, _, _ in log.phase_starts]
        self.by_role = dict.fromkeys(ROLES, 0)
        self.live = 0
        self.best: tuple[int, Phase, dict[str, int]] = (-1, Phase.FORWARD, {})
        self.by_phase: dict[Phase, int] = {}

    def add(self, role: str, size: int) -> None:
        self.live += size
        self.by_role[role] += size

    def sample(self, position: int) -> None:
        """Consider the live bytes at event `position` for the peaks of its phase."""
        i = bisect.bisect_right(self.boundaries, position) - 1
        if i < 0:
            return
        _, step, phase = self.log.phase_starts[i]
        if step != self.measured_step:
            return
        self.by_phase[phase] = max(self.by_phase.get(phase, 0), self.live)
        if self.live > self.best[0]:
            self.best = (self.live, phase, dict(self.by_role))


def replay(log: EventLog, measured_step: int) -> Replay:
    """Replay `log` as a GPU runs it; peaks are taken over the events of step `measured_step` (0-based)."""
    log = fold_inplace_accumulations(log)
    allocator = CachingAllocatorModel()
    blocks: dict[int, object] = {}
    peaks = _Peaks(log, measured_step)
    marks = sorted((position, name) for name, position in log.marks.items())
    at_marks: dict[str, dict[str, int]] = {}
    for position, event in enumerate(log.events):
        while marks and marks[0][0] <= position:
            at_marks[marks.pop(0)[1]] = dict(peaks.by_role)
        if position in log.phase_positions:
            peaks.sample(position)  # a phase starts here: its level before any allocation counts
        alloc = abs(event) - 1
        if log.roles[alloc] == HOST:
            continue
        if event > 0:
            peaks.add(log.roles[alloc], log.sizes[alloc])
            blocks[alloc] = allocator.malloc(log.sizes[alloc])
            peaks.sample(position)
        else:
            peaks.add(log.roles[alloc], -log.sizes[alloc])
            allocator.free(blocks.pop(alloc))
    for _, name in marks:
        at_marks[name] = dict(peaks.by_role)
    if len(log.events) in log.phase_positions:
        peaks.sample(len(log.events))  # a phase that ended the run without a single event
    if peaks.best[0] < 0:
        raise ValueError(f"the event log has no events in step {measured_step}")
    return Replay(
        peak_bytes=peaks.best[0],
        peak_phase=peaks.best[1],
        peak_breakdown=peaks.best[2],
        peak_by_phase=peaks.by_phase,
        reserved_bytes=allocator.peak_reserved_bytes,
        allocator_allocated_bytes=allocator.peak_allocated_bytes,
        at_marks=at_marks,
    )

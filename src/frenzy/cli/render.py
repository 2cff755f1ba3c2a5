"""Rich tables for memory estimates and plans. Sizes are printed in GiB and say so."""

from __future__ import annotations

from rich.table import Table

from frenzy.core.units import gib
from frenzy.memory.plans import PlanChoice
from frenzy.memory.result import COMPONENTS, MemoryEstimate


def memory_table(title: str, estimates: dict[str, MemoryEstimate]) -> Table:
    """One column per estimate (e.g. formula and trace side by side), one row per component."""
    table = Table(title=title, title_justify="left")
    table.add_column("component")
    for name in estimates:
        table.add_column(f"{name} (GiB)", justify="right")
    if len(estimates) == 2:
        table.add_column("diff", justify="right")

    def row(label, values, style=None):
        cells = [f"{gib(v):.2f}" for v in values]
        if len(values) == 2:
            a, b = values
            cells.append(f"{(a - b) / b:+.1%}" if b else "-")
        table.add_row(label, *cells, style=style)

    for component in COMPONENTS:
        row(component, [e.breakdown.get(component, 0) for e in estimates.values()])
    table.add_section()
    row("allocated (max_memory_allocated)", [e.allocated_bytes for e in estimates.values()], "bold")
    row("reserved (max_memory_reserved)", [e.reserved_bytes for e in estimates.values()], "bold")
    row("device (nvidia-smi)", [e.device_bytes for e in estimates.values()], "bold cyan")
    row("required to run (allocated + runtime)", [e.required_bytes for e in estimates.values()], "bold")
    table.caption = "peak phase: " + ", ".join(f"{n}: {e.peak_phase.value}" for n, e in estimates.items())
    return table


def by_gpu_type(choices: list[PlanChoice]) -> list[list[PlanChoice]]:
    """Ranked plans grouped per GPU type, types in the order of their best plan. Within a type: the
    runnable plans (the one on the fewest GPUs first, then the faster ones in rank order), then the
    plans the worker does not run, in the same order."""
    groups: dict[str, list[PlanChoice]] = {}
    for c in choices:
        groups.setdefault(c.gpu.name, []).append(c)

    def order(plans: list[PlanChoice]) -> list[PlanChoice]:
        if not plans:
            return []
        fewest = min(c.num_gpus for c in plans)
        first = next(c for c in plans if c.num_gpus == fewest)
        return [first, *(c for c in plans if c is not first)]

    return [order([c for c in plans if c.runnable]) + order([c for c in plans if not c.runnable])
            for plans in groups.values()]


def plans_legend(faster: int) -> str:
    from frenzy.memory.fit import DEFAULT_SAFETY_MARGIN

    return (f"Per GPU type: the plan on the fewest GPUs that fit, then up to {faster} predicted faster; needs = "
            f"predicted peak per GPU (allocated + CUDA runtime), free = GPU memory less the "
            f"{DEFAULT_SAFETY_MARGIN:.0%} safety margin less needs.")


def plans_table(title: str, choices: list[PlanChoice], job=None, show_reason: bool = False) -> Table:
    """Plans in the given order; with the job, the perf model's predicted time and cost of each; with
    `show_reason`, whether the worker runs each plan (the reasons: not_runnable_reasons)."""
    table = Table(title=title, title_justify="left")
    columns = [("#", "right"), ("GPU type", "left"), ("GPUs", "right"), ("layout", "left"),
               ("micro x accum", "right"), ("recompute", "left"), ("needs GiB", "right"),
               ("free GiB", "right"), ("of GiB", "right")]
    if job is not None:
        columns += [("time h", "right"), ("cost $", "right")]
    reasons = not_runnable_reasons(choices) if show_reason else []
    if show_reason:
        columns.append(("runs", "left"))
    for column, justify in columns:
        table.add_column(column, justify=justify)
    previous = None
    for i, c in enumerate(choices, 1):
        if previous is not None and c.gpu.name != previous:
            table.add_section()
        previous = c.gpu.name
        p = c.plan
        layout = f"dp{p.dp} tp{p.tp}{'+sp' if p.sequence_parallel else ''} pp{p.pp} zero{int(p.zero)}"
        cells = [str(i), c.gpu.name, str(p.num_gpus), layout, f"{p.micro_batch} x {p.grad_accum}",
                 p.recompute.name.lower(), f"{gib(c.memory.required_bytes):.1f}",
                 f"{gib(c.headroom_bytes):.1f}", f"{gib(c.gpu.memory_bytes):.1f}"]
        if job is not None:
            from frenzy.memory.ranking import predicted_cost_usd, predicted_duration_s

            cells += [f"{predicted_duration_s(job, c) / 3600:.2f}", f"{predicted_cost_usd(job, c):.2f}"]
        if show_reason:
            cells.append("yes" if c.runnable else f"no ({reasons.index(c.unsupported) + 1})")
        table.add_row(*cells, style=None if c.runnable else "dim")
    return table


def not_runnable_reasons(choices: list[PlanChoice]) -> list[str]:
    """The distinct reasons the worker does not run some of the plans, numbered by `plans_table`."""
    return list(dict.fromkeys(c.unsupported for c in choices if not c.runnable))

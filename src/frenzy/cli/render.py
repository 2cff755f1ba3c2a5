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


def plans_table(title: str, choices: list[PlanChoice], job=None) -> Table:
    """Ranked plans; with the job, the perf model's predicted time and cost of each."""
    table = Table(title=title, title_justify="left")
    columns = [("#", "right"), ("GPU type", "left"), ("GPUs", "right"), ("layout", "left"),
               ("micro x accum", "right"), ("recompute", "left"), ("needs GiB", "right"),
               ("of GiB", "right"), ("headroom", "right")]
    if job is not None:
        columns += [("time h", "right"), ("cost $", "right")]
    for column, justify in columns:
        table.add_column(column, justify=justify)
    for i, c in enumerate(choices, 1):
        p = c.plan
        layout = f"dp{p.dp} tp{p.tp}{'+sp' if p.sequence_parallel else ''} pp{p.pp} zero{int(p.zero)}"
        cells = [str(i), c.gpu.name, str(p.num_gpus), layout, f"{p.micro_batch} x {p.grad_accum}",
                 p.recompute.name.lower(), f"{gib(c.memory.required_bytes):.1f}",
                 f"{gib(c.gpu.memory_bytes):.1f}", f"{c.headroom_fraction:.0%}"]
        if job is not None:
            from frenzy.memory.ranking import predicted_cost_usd, predicted_duration_s

            cells += [f"{predicted_duration_s(job, c) / 3600:.2f}", f"{predicted_cost_usd(job, c):.2f}"]
        table.add_row(*cells)
    return table

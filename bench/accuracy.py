"""MARP against published peak-memory measurements, side by side with other estimators.

Reads ../shared/memory/published_measurements_dev.csv, expresses each row as a job and plan where
possible (frenzy.memory.measurements), and writes the table, the median and worst absolute
percentage error per estimator, and the rows that cannot be expressed (with the reason) into
docs/ACCURACY.md.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from estimators import ESTIMATORS  # noqa: E402
from report import write_section  # noqa: E402

from frenzy.core import catalog  # noqa: E402
from frenzy.memory import states  # noqa: E402
from frenzy.memory.estimate import estimate  # noqa: E402
from frenzy.memory.measurements import load_measurements  # noqa: E402

CSV = HERE.parent.parent / "shared" / "memory" / "published_measurements_dev.csv"


def estimator_row(repo_id: str, job, plan) -> dict:
    """A job and plan in the row form the other estimators take (bench/estimators)."""
    params = states.stage_params(job.model, job.training, plan, 0)
    return {
        "model_config": catalog.model_config(repo_id), "repo_id": repo_id,
        "num_params": job.model.num_params, "trainable_params": params.trainable,
        "precision": job.training.precision.value, "method": job.training.method.value,
        "zero_stage": int(plan.zero), "dp": plan.dp, "tp": plan.tp, "pp": plan.pp,
        "micro_batch": plan.micro_batch, "seq_len": job.seq_len,
        "recompute": plan.recompute.name.lower(), "optimizer": job.training.optimizer.value,
        "attention": job.training.attention.value,
    }


def pct(predicted: float | None, measured: float) -> float | None:
    return None if predicted is None else (predicted - measured) / measured


def main() -> None:
    if not CSV.exists():
        sys.exit(f"{CSV} is missing: the shared data folder must sit beside the checkout")
    rows = load_measurements(CSV)
    names = ["MARP"] + [e.NAME for e in ESTIMATORS]
    errors: dict[str, list[float]] = {n: [] for n in names}
    lines = ["| row | metric | unit | measured | " + " | ".join(f"{n} (err)" for n in names) + " |",
             "|---|---|---|---:|" + "---:|" * len(names)]
    skipped = []
    for m in rows:
        if not m.expressible:
            skipped.append(f"| {m.label} | {m.reason} |")
            continue
        measured = m.measured_bytes
        preds = [m.predicted_bytes(estimate(m.job, m.plan))]
        preds += [e.predict(estimator_row(m.row["model"], m.job, m.plan)) for e in ESTIMATORS]
        cells = []
        for name, p in zip(names, preds):
            err = pct(p, measured)
            if err is None:
                cells.append("n/a")
                continue
            errors[name].append(abs(err))
            cells.append(f"{p / m.unit_bytes:.2f} ({err:+.1%})")
        unit = "GiB" if m.unit_bytes == 2**30 else "GB"
        label = m.label + (" ≈" if m.approximate else "")
        lines.append(f"| {label} | {m.metric} | {unit} | {measured / m.unit_bytes:.2f} | " + " | ".join(cells) + " |")
    summary = ["| estimator | rows | median abs error | worst abs error |", "|---|---:|---:|---:|"]
    for name in names:
        e = errors[name]
        if e:
            summary.append(f"| {name} | {len(e)} | {statistics.median(e):.1%} | {max(e):.1%} |")
        else:
            summary.append(f"| {name} | 0 | n/a | n/a |")
    notes = "\n".join(f"- **{e.NAME}**: {e.describe()}" for e in ESTIMATORS)
    text = (
        "## Published measurements (development set)\n\n"
        f"Every row of `../shared/memory/published_measurements_dev.csv` that MARP can express, predicted "
        "in the row's own unit and metric (active/`max_memory_allocated` peaks compare with MARP's "
        "allocated bytes). Rows marked ≈ use variable-length data and are compared at their longest "
        "sequence.\n\n" + "\n".join(summary) + "\n\n" + "\n".join(lines)
        + "\n\nRows that cannot be expressed:\n\n| row | reason |\n|---|---|\n" + "\n".join(skipped)
        + "\n\nHow the other estimators were run:\n\n" + notes
    )
    print(text)
    write_section("published-dev", text, doc="docs/ACCURACY.md", command="python bench/accuracy.py")


if __name__ == "__main__":
    main()

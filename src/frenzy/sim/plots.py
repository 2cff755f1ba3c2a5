"""PNG plots of simulation results (matplotlib, Agg backend: no display needed), each with a CSV of
the series it draws. Time plots end at the last completion (the last job finished or given up over
all policies): after it nothing is left to see. Titles carry the trace, cluster, job count and seed."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from frenzy.sim.result import SimResult


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _subtitle(header: dict) -> str:
    return f"{Path(str(header.get('trace', '?'))).name} on {header.get('cluster', '?')}, " \
           f"{header.get('jobs', '?')} jobs, seed {header.get('seed', '?')}"


def _write_csv(path: Path, columns: tuple, rows) -> Path:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        writer.writerows(rows)
    return path


def jct_cdf(results: list[SimResult], path: Path, header: dict) -> list[Path]:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    rows = []
    for r in results:
        jct = np.sort(r.jcts()) / 3600
        if len(jct):
            fraction = np.arange(1, len(jct) + 1) / len(jct)
            ax.plot(jct, fraction, label=f"{r.policy} ({len(jct)} finished, avg {jct.mean():.1f} h)")
            rows += [(r.policy, f"{h:.6g}", f"{q:.6g}") for h, q in zip(jct, fraction)]
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (hours, log scale)")
    ax.set_ylabel("fraction of the policy's finished jobs")
    ax.set_title(f"JCT CDF — {_subtitle(header)}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return [path, _write_csv(path.with_suffix(".csv"), ("policy", "jct_h", "fraction_finished"), rows)]


def _until(r: SimResult, end_s: float) -> tuple[np.ndarray, int]:
    """Sample times up to the policy's own last completion (events after it are stale completions of
    preempted attempts: nothing changes), in hours, and how many samples that is."""
    t = np.array(r.times)
    keep = int(np.searchsorted(t, min(end_s, r.last_completion_s()), side="right"))
    return t[:keep] / 3600, keep


def queue_length(results: list[SimResult], path: Path, header: dict, end_s: float) -> list[Path]:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    rows = []
    for r in results:
        t, keep = _until(r, end_s)
        ax.step(t, r.queue_len[:keep], where="post", label=r.policy, linewidth=1)
        rows += [(r.policy, f"{h:.6g}", q) for h, q in zip(t, r.queue_len[:keep])]
    ax.set_xlim(0, end_s / 3600)
    ax.set_xlabel("simulated time (hours), to the last completion")
    ax.set_ylabel("queued jobs")
    ax.set_title(f"Queue length — {_subtitle(header)}", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return [path, _write_csv(path.with_suffix(".csv"), ("policy", "t_h", "queued_jobs"), rows)]


def utilisation(results: list[SimResult], path: Path, header: dict, end_s: float,
                capacity: dict[str, int]) -> list[Path]:
    """One panel for the whole cluster, then one per GPU type: allocated GPUs over that type's GPUs."""
    plt = _pyplot()
    panels = [("all types", None, sum(capacity.values()))] + [(t, t, n) for t, n in capacity.items()]
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 1.9 * len(panels) + 1), sharex=True, squeeze=False)
    rows = []
    for ax, (label, gpu_type, total) in zip(axes[:, 0], panels):
        for r in results:
            t, keep = _until(r, end_s)
            busy = np.array(r.busy[:keep] if gpu_type is None else r.busy_by_type.get(gpu_type, [])[:keep])
            ax.step(t, busy / total, where="post", label=r.policy, linewidth=1)
            rows += [(r.policy, label, f"{h:.6g}", b, f"{b / total:.6g}") for h, b in zip(t, busy)]
        ax.set_ylim(0, 1.05)
        ax.set_ylabel(f"{label}\n({total} GPUs)", fontsize=8)
        ax.grid(True, alpha=0.3)
    axes[0, 0].set_title(f"Allocated GPUs, fraction of each type — {_subtitle(header)}", fontsize=10)
    axes[0, 0].legend(fontsize=7, ncol=len(results))
    axes[-1, 0].set_xlim(0, end_s / 3600)
    axes[-1, 0].set_xlabel("simulated time (hours), to the last completion")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return [path, _write_csv(path.with_suffix(".csv"), ("policy", "gpu_type", "t_h", "allocated_gpus",
                                                        "fraction_of_type"), rows)]


def write_plots(results: list[SimResult], directory: str | Path, header: dict | None = None) -> list[Path]:
    """jct_cdf, queue_length and utilisation, each a .png and a .csv, in `directory` (created if
    missing). `header`: trace, cluster, jobs, seed for the titles."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    header = header or {"cluster": results[0].cluster if results else "?"}
    end_s = max((r.last_completion_s() for r in results), default=0.0) or 1.0
    capacity = results[0].capacity if results else {}
    return [*jct_cdf(results, out / "jct_cdf.png", header),
            *queue_length(results, out / "queue_length.png", header, end_s),
            *utilisation(results, out / "utilisation.png", header, end_s, capacity)]

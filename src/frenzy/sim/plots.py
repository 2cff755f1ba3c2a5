"""PNG plots of simulation results (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from frenzy.sim.result import SimResult


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def jct_cdf(results: list[SimResult], path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in results:
        jct = np.sort(r.jcts()) / 3600
        if len(jct):
            ax.plot(jct, np.arange(1, len(jct) + 1) / len(jct), label=f"{r.policy} (avg {jct.mean():.1f} h)")
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (hours, log scale)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title(f"JCT CDF — {results[0].cluster}" if results else "JCT CDF")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _over_time(results: list[SimResult], path: Path, key: str, ylabel: str, scale) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for r in results:
        t = np.array(r.times) / 3600
        y = np.array(getattr(r, key), dtype=float) * scale(r)
        ax.step(t, y, where="post", label=r.policy, linewidth=1)
    ax.set_xlabel("simulated time (hours)")
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_plots(results: list[SimResult], directory: str | Path) -> list[Path]:
    """jct_cdf.png, queue_length.png and utilisation.png in `directory` (created if missing)."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    return [
        jct_cdf(results, out / "jct_cdf.png"),
        _over_time(results, out / "queue_length.png", "queue_len", "queued jobs", lambda r: 1.0),
        _over_time(results, out / "utilisation.png", "busy", "allocated GPUs (fraction of cluster)",
                   lambda r: 1.0 / r.total_gpus),
    ]

"""Memory telemetry of a worker and the fake-GPU OOM hook.

On CUDA the peak is `torch.cuda.max_memory_reserved` (what the caching allocator holds), and a too
small card is emulated with `set_per_process_memory_fraction`, so a real OOM takes the same path.
On CPU there is no device memory: the worker's *emulated* peak is MARP's predicted device bytes
times the job's `emulate_peak_factor`, and a step whose emulated peak exceeds the fake card raises
a genuine `torch.OutOfMemoryError`, exactly as the CUDA allocator would. On CUDA the same factor
becomes real memory (`hold_emulated_excess`), so the card's own allocator decides.
"""

from __future__ import annotations

import re

import torch

from frenzy.core import cuda_oom
from frenzy.train.config import WorkerConfig

PEAK_MARKER = "frenzy-peak-bytes="
PEAK_PATTERN = re.compile(re.escape(PEAK_MARKER) + r"(\d+)")


def emulated_peak_bytes(cfg: WorkerConfig) -> int:
    return int(cfg.predicted_peak_bytes * cfg.emulate_peak_factor)


def limit_cuda_memory(cfg: WorkerConfig) -> None:
    """Make a larger real card behave like the (smaller) one the plan was made for."""
    if torch.cuda.is_available() and cfg.gpu_memory_bytes:
        total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
        if cfg.gpu_memory_bytes < total:
            torch.cuda.set_per_process_memory_fraction(cfg.gpu_memory_bytes / total)


def check_fake_capacity(cfg: WorkerConfig, step: int) -> None:
    """Raise torch.OutOfMemoryError where a real card of this size would.

    MARP's peak is that of the second step (optimizer state alive), so the check fires there.
    """
    if not cfg.fake_gpu or torch.cuda.is_available() or step < 2 or not cfg.gpu_memory_bytes:
        return
    peak = emulated_peak_bytes(cfg)
    if peak > cfg.gpu_memory_bytes:
        raise torch.OutOfMemoryError(
            f"CUDA out of memory (emulated on CPU by Frenzy's fake-GPU mode). The {cfg.gpu_type} has "
            f"{cfg.gpu_memory_bytes / 2**30:.2f} GiB and this step needs {peak / 2**30:.2f} GiB "
            f"({PEAK_MARKER}{peak}).")


def hold_emulated_excess(cfg: WorkerConfig, step: int) -> torch.Tensor | None:
    """On CUDA, from the first step >= 2 on, a buffer of (emulate_peak_factor - 1) x MARP's prediction that the
    caller keeps alive: the job then really needs what the factor says (as an unmodelled buffer
    would), and a too-small card raises the allocator's own out-of-memory error."""
    if not torch.cuda.is_available() or step < 2 or cfg.emulate_peak_factor <= 1 or not cfg.predicted_peak_bytes:
        return None
    excess = int((cfg.emulate_peak_factor - 1) * cfg.predicted_peak_bytes)
    return torch.empty(excess, dtype=torch.uint8, device="cuda")


def with_peak(exc: torch.OutOfMemoryError) -> torch.OutOfMemoryError:
    """A CUDA OOM restated with the least the step needed (what was allocated plus what it asked
    for), in the marker `peak_from_error` reads, so the re-plan learns from the real failure."""
    requested = cuda_oom.requested_bytes(str(exc))
    if not torch.cuda.is_available() or requested is None or PEAK_MARKER in str(exc):
        return exc
    return torch.OutOfMemoryError(f"{exc} ({PEAK_MARKER}{torch.cuda.memory_allocated() + requested})")


def peak_bytes(cfg: WorkerConfig) -> tuple[int, str]:
    if torch.cuda.is_available():
        return int(torch.cuda.max_memory_reserved()), "cuda"
    return emulated_peak_bytes(cfg), "emulated"


def peak_from_error(text: str) -> int | None:
    match = PEAK_PATTERN.search(text)
    return int(match.group(1)) if match else None

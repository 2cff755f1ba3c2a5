"""Small traces for simulator tests: a canonical CSV written here, and slices of the shared traces."""

from pathlib import Path

import pytest

from frenzy.sim.trace import TraceJob, write_frenzy_csv

SHARED = Path(__file__).resolve().parents[2].parent / "shared"

MODELS = [("EleutherAI/pythia-160m", "full"), ("Qwen/Qwen2.5-0.5B", "full"), ("meta-llama/Llama-3.2-1B", "full"),
          ("Qwen/Qwen2.5-7B", "lora"), ("meta-llama/Llama-3.2-3B", "full")]


def small_jobs(n: int = 24) -> list[TraceJob]:
    """A bursty mix: every model, 1-8 requested GPUs, a few minutes to a few hours of work."""
    jobs = []
    for i in range(n):
        model, method = MODELS[i % len(MODELS)]
        gpus = (1, 2, 4, 8)[i % 4]
        jobs.append(TraceJob(job_id=f"j{i:03d}", submit_time_s=120.0 * i, model=model, global_batch=8 * gpus,
                             seq_len=(512, 1024)[i % 2], steps=50 + 37 * (i % 7), method=method,
                             requested_gpus=gpus, requested_gpu_type="T4-16G" if i % 5 == 0 else None,
                             user=f"u{i % 3}"))
    return jobs


@pytest.fixture
def trace_csv(tmp_path) -> Path:
    path = tmp_path / "small.csv"
    write_frenzy_csv(small_jobs(), path)
    return path


@pytest.fixture
def shared_traces() -> Path:
    if not (SHARED / "traces").is_dir():
        pytest.skip(f"shared traces folder {SHARED / 'traces'} is missing (it sits beside the checkout in CI)")
    return SHARED / "traces"

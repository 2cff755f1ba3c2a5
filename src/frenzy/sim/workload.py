"""Turn a GPU-cluster trace row (arrival, GPU request, duration on the original hardware) into an
LLM training job, by a documented, seeded, reproducible mapping.

For each row, with a generator seeded by (seed, CRC32 of the job id):
 1. GPUs: the request rounded down to a power of two, at most MAX_REQUEST_GPUS (kept as
    `requested_gpus`; the trace has no GPU type, so `requested_gpu_type` stays empty).
 2. Model: a tier of MODEL_TIERS (catalog model + method, smallest first) from the row's GPU-hours,
    tier = round(1.5 log10(GPU-hours) + 3 + N(0, 0.75)), clipped; ElasticFlow's `ef` rows whose DL
    model is a vision or speech network move one tier down (they were the smaller jobs). The tier is
    then lowered until the user's plan on the request fits the reference GPU with the error bound
    to spare (the original job ran there, so it must have fitted).
 3. Sequence length: uniform over SEQ_LENS (capped by the model's positions); global batch:
    requested GPUs x a per-GPU batch uniform over PER_GPU_BATCH (ElasticFlow `ef`: its batch size per
    GPU / 8, rounded to a power of two, clipped to PER_GPU_BATCH's range).
 4. Steps: the trace duration over the predicted step time (frenzy.perf) of the user's plan on the
    request on REFERENCE_GPU, at least 1, so the job lasts as long as in the trace there.
All jobs train in fp16 mixed precision so that every GPU generation in the clusters can run them.
"""

from __future__ import annotations

import math
import zlib
from collections import Counter
from functools import lru_cache
from pathlib import Path

import numpy as np

from frenzy.core.errors import FrenzyError
from frenzy.core.hf_config import load_model
from frenzy.core.job import JobSpec
from frenzy.core.training import Method, Precision, TrainingConfig
from frenzy.sched.configs import config_choice, peak_bytes
from frenzy.sim import truth
from frenzy.sim.collector import building
from frenzy.sim.trace import (FORMAT_COLUMNS, MAX_TIME_S, RawJob, TraceJob, check_format, detect_format,
                              read_elasticflow, read_frenzy_csv, read_philly)
from frenzy.core import catalog

REFERENCE_GPU = "V100-SXM-32G"  # Philly and Microsoft ITP (ElasticFlow) ran P100/V100-class GPUs
MODEL_TIERS = (
    ("EleutherAI/pythia-160m", "full"),
    ("Qwen/Qwen2.5-0.5B", "full"),
    ("meta-llama/Llama-3.2-1B", "full"),
    ("Qwen/Qwen2.5-1.5B", "full"),
    ("meta-llama/Llama-3.2-3B", "full"),
    ("Qwen/Qwen2.5-7B", "lora"),
    ("meta-llama/Llama-3.1-8B", "full"),
    ("meta-llama/Llama-2-13b-hf", "lora"),
)
SEQ_LENS = (512, 1024, 2048)
PER_GPU_BATCH = (2, 4, 8)
MAX_REQUEST_GPUS = 64
PRECISION = "fp16-mixed"
SMALLER_EF_MODELS = frozenset({"resnet50", "vgg16", "inception3", "deepspeech2"})


def _pow2_floor(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)


def job_rng(seed: int, job_id: str) -> np.random.Generator:
    words = [seed, zlib.crc32(job_id.encode())]
    # Where both fit 32 bits (a seed below 2**32), an array of 32-bit words seeds the stream the list
    # seeds, without numpy's per-element conversion of a list (a third of loading a trace).
    return np.random.default_rng(np.array(words, dtype=np.uint32) if 0 <= seed < 2**32 else words)


@lru_cache(maxsize=4096)
def _reference_fit(model: str, method: str, seq: int, batch: int, gpus: int) -> float | None:
    """Step time of the user's plan on `gpus` reference GPUs, or None if it would not fit there."""
    spec = JobSpec(model=load_model(model), training=TrainingConfig(precision=Precision(PRECISION),
                   method=Method(method)), seq_len=seq, global_batch=batch)
    reference = catalog.gpu_type(REFERENCE_GPU)
    config = config_choice(spec, REFERENCE_GPU, gpus, reference.gpus_per_node)
    if config is None or not config.fits_predicted:
        return None
    if truth.true_peak_bytes(peak_bytes(config.choice.memory), truth.MARP_ERROR_BOUND) > reference.memory_bytes:
        return None
    return config.step_time_s


@lru_cache(maxsize=None)
def _max_positions(model: str) -> int:
    """A tier model's position limit: its catalog config is read once, not once per job."""
    return load_model(model).max_position_embeddings


def to_llm_job(raw: RawJob, seed: int) -> TraceJob:
    rng = job_rng(seed, raw.job_id)
    gpus = min(_pow2_floor(raw.num_gpus), MAX_REQUEST_GPUS)
    gpu_hours = max(raw.duration_s, 1.0) * raw.num_gpus / 3600
    tier = round(1.5 * math.log10(gpu_hours) + 3 + rng.normal(0, 0.75))
    if raw.dl_model in SMALLER_EF_MODELS:
        tier -= 1
    tier = int(min(max(tier, 0), len(MODEL_TIERS) - 1))
    seq_pick, batch_pick = rng.integers(len(SEQ_LENS)), rng.integers(len(PER_GPU_BATCH))
    per_gpu = PER_GPU_BATCH[batch_pick]
    if raw.batch_size:
        per_gpu = min(max(_pow2_floor(raw.batch_size // max(raw.num_gpus, 1) // 8), PER_GPU_BATCH[0]),
                      PER_GPU_BATCH[-1])
    batch = gpus * per_gpu
    for t in range(tier, -1, -1):
        model, method = MODEL_TIERS[t]
        seq = min(SEQ_LENS[seq_pick], _max_positions(model))
        step_s = _reference_fit(model, method, seq, batch, gpus)
        if step_s is not None:
            break
    else:
        raise ValueError(f"job {raw.job_id}: even {MODEL_TIERS[0][0]} does not fit {gpus}x {REFERENCE_GPU}")
    steps = max(1, round(raw.duration_s / step_s))
    return TraceJob(job_id=raw.job_id, submit_time_s=raw.submit_time_s, model=model, global_batch=batch,
                    seq_len=seq, steps=steps, precision=PRECISION, method=method, requested_gpus=gpus,
                    user=raw.user or None)


def load_trace(path: str | Path, fmt: str = "auto", *, seed: int = 0, max_jobs: int | None = None,
               skip_jobs: int = 0) -> list[TraceJob]:
    """Jobs of a trace file in arrival order (`skip_jobs` then at most `max_jobs` of them), times
    shifted so the first kept job arrives at 0."""
    if max_jobs is not None and max_jobs < 1:
        raise ValueError(f"max jobs must be >= 1 (leave it out to use every job), got {max_jobs}")
    if skip_jobs < 0:
        raise ValueError(f"skip jobs must be >= 0, got {skip_jobs}")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"trace {path} not found; the shared traces live in ../shared/traces")
    if fmt not in ("auto", *FORMAT_COLUMNS):
        raise ValueError(f"unknown trace format '{fmt}'; choose one of: auto, {', '.join(FORMAT_COLUMNS)}")
    if fmt == "auto":
        fmt = detect_format(path)
    else:
        check_format(path, fmt)
    with building():  # every job read stays alive: collections would find nothing (frenzy.sim.collector)
        if fmt == "frenzy":
            jobs = sorted(read_frenzy_csv(path), key=lambda j: j.submit_time_s)
        else:
            raw = read_elasticflow(path) if fmt == "elasticflow" else read_philly(path)
            raw = sorted(raw, key=lambda j: j.submit_time_s)[skip_jobs:]
            raw = raw[:max_jobs] if max_jobs is not None else raw
            jobs = [to_llm_job(r, seed) for r in raw]
            skip_jobs = 0
    jobs = jobs[skip_jobs:]
    jobs = jobs[:max_jobs] if max_jobs is not None else jobs
    if not jobs:
        return []
    repeated = next((job_id for job_id, n in Counter(j.job_id for j in jobs).items() if n > 1), None)
    if repeated is not None:  # the simulator refuses them too; here it is a mistake in the file
        raise ValueError(f"{path}: job id {repeated!r} is repeated; every job needs its own")
    start = jobs[0].submit_time_s
    return [j if start == 0 else _shift(j, start) for j in jobs]


def _shift(job: TraceJob, start: float) -> TraceJob:
    from dataclasses import replace
    return replace(job, submit_time_s=job.submit_time_s - start)


def scale_arrivals(jobs: list[TraceJob], factor: float) -> list[TraceJob]:
    """Multiply every submit time by `factor` (< 1 compresses the trace: a trace recorded on a big
    cluster offers a comparable load to a small one). Durations are untouched."""
    if not 0 < factor < math.inf:
        raise ValueError(f"arrival scale must be a number > 0, got {factor}")
    last = max((j.submit_time_s for j in jobs), default=0.0) * factor
    if last > MAX_TIME_S:
        raise ValueError(f"arrival scale {factor:.4g} puts the last arrival at {last:.4g} s, past the simulator's "
                         f"{MAX_TIME_S:.4g} s (~285 years); use a smaller scale")
    from dataclasses import replace
    return [replace(j, submit_time_s=j.submit_time_s * factor) for j in jobs]


def reference_duration_s(job: TraceJob) -> float:
    """How long the job runs as its user asked (its plan on `requested_gpus`, 1 if none, frenzy.sched.configs)
    on REFERENCE_GPU: for a job mapped from a public trace, the trace's recorded duration (step 4 of
    the mapping). bf16 counts as fp16-mixed there (the same tensor-core rate; the reference has no
    bf16), and a job too big for the reference's memory counts at its plan's step time all the same."""
    gpus = job.requested_gpus or 1
    precision = Precision.FP16_MIXED if Precision(job.precision).needs_bf16 else Precision(job.precision)
    return job.steps * _reference_step_s(job.model, job.method, precision, job.seq_len, job.global_batch, gpus)


@lru_cache(maxsize=4096)
def _reference_step_s(model: str, method: str, precision: Precision, seq: int, batch: int, gpus: int) -> float:
    spec = JobSpec(model=load_model(model), training=TrainingConfig(precision=precision, method=Method(method)),
                   seq_len=seq, global_batch=batch)
    reference = catalog.gpu_type(REFERENCE_GPU)
    config = config_choice(spec, REFERENCE_GPU, gpus, reference.gpus_per_node)
    if config is None:  # the global batch has no data-parallel split on that many GPUs: 1 GPU, shared out
        return config_choice(spec, REFERENCE_GPU, 1, reference.gpus_per_node).step_time_s / gpus
    return config.step_time_s


def offered_load(jobs: list[TraceJob], total_gpus: int) -> float:
    """Requested GPU-hours per hour of the arrival window, over the cluster's GPUs:
        sum_j requested_gpus_j x reference_duration_s(j) / (total_gpus x (last submit - first submit)).
    1.0: the trace alone, run as requested on the reference GPU, would keep every GPU busy while jobs
    arrive. Faster GPUs serve the same load in less time; it is a property of the trace and the GPU count."""
    if len(jobs) < 2:
        raise ValueError("offered load needs at least two jobs (it is work over the arrival window)")
    span = max(j.submit_time_s for j in jobs) - min(j.submit_time_s for j in jobs)
    if span <= 0:
        raise ValueError("every job arrives at the same instant: the offered load is unbounded; "
                         "use --arrival-scale, not --load")
    work = 0.0
    for j in jobs:
        try:
            work += (j.requested_gpus or 1) * reference_duration_s(j)
        except (FrenzyError, ValueError) as exc:
            raise ValueError(f"job {j.job_id}: {exc}") from exc
    return work / (total_gpus * span)


def arrival_scale_for_load(jobs: list[TraceJob], total_gpus: int, load: float) -> float:
    """The factor on submit times (scale_arrivals) that makes the offered load `load`: the load is
    inversely proportional to the arrival window, which the factor stretches."""
    if not 0 < load < math.inf:
        raise ValueError(f"--load must be a number > 0 (requested GPU-hours per cluster GPU-hour), got {load}")
    return offered_load(jobs, total_gpus) / load

"""Step-time model of a parallel plan on a GPU type: FLOPs, achievable efficiency, communication.

`step_time(job, plan, gpu)` returns a `StepTime` breakdown; `job_duration_s` multiplies it by the
job's steps. Pure: no torch, no clock. Sanity-checked against published throughputs by
bench/perf_sanity.py (results in docs/BENCHMARKS.md).
"""

from frenzy.core.gpu import DEFAULT_INTER_NODE_BANDWIDTH_BYTES_S
from frenzy.perf.step import StepTime, job_duration_s, step_time

__all__ = ["DEFAULT_INTER_NODE_BANDWIDTH_BYTES_S", "StepTime", "job_duration_s", "step_time"]

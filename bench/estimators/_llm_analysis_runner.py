"""Runs llm-analysis's training analysis for a list of jobs; stdlib + llm_analysis only.

llm-analysis 0.2.x pins transformers<5 and huggingface-hub<0.15, so it lives in its own venv
(.venv-llm-analysis) and bench/estimators/llm_analysis_est.py calls this file with that venv's
python: JSON {"jobs": [...]} on stdin, JSON {"version": ..., "results": [...]} on stdout.
Each job holds the keyword arguments of ModelConfig, DtypeConfig, GPUConfig, ParallelismConfig
and LLMAnalysis.training(); each result is the summary dict training() returns (or an error).
The tool's log goes to stderr.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys


def run(jobs: list[dict], log_level: str = "ERROR") -> dict:
    import importlib.metadata

    from llm_analysis.analysis import ActivationRecomputation, DSZeRO, LLMAnalysis
    from llm_analysis.config import DtypeConfig, GPUConfig, ModelConfig, ParallelismConfig
    from llm_analysis.logger import logger

    logger.setLevel(logging.getLevelName(log_level))
    results = []
    for job in jobs:
        try:
            analysis = LLMAnalysis(
                ModelConfig(**job["model"]),
                GPUConfig(**job["gpu"]),
                DtypeConfig(**job["dtype"]),
                ParallelismConfig(**job["parallelism"]),
            )
            kwargs = dict(job["training"])
            kwargs["activation_recomputation"] = ActivationRecomputation(kwargs["activation_recomputation"])
            kwargs["ds_zero"] = DSZeRO(kwargs["ds_zero"])
            with contextlib.redirect_stdout(sys.stderr):
                summary = analysis.training(**kwargs)
            results.append({k: v for k, v in summary.items() if isinstance(v, (int, float, str, type(None)))})
        except Exception as exc:  # noqa: BLE001 - reported per job
            results.append({"error": f"{type(exc).__name__}: {exc}"})
    return {"version": importlib.metadata.version("llm-analysis"), "results": results}


if __name__ == "__main__":
    request = json.load(sys.stdin)
    json.dump(run(request["jobs"], request.get("log_level", "ERROR")), sys.stdout)

"""Third-party peak-memory estimators that bench/accuracy.py runs side by side with MARP.

Each module exposes
    NAME: str                        display name
    predict(row: dict) -> int|None   predicted peak bytes per GPU, None if it cannot express the row
    describe() -> str                what it models, how it is called, versions
    AVAILABLE: bool                  False when its tool could not be imported here

`row` keys: model_config, repo_id, num_params, trainable_params, precision, method, zero_stage,
dp, tp, pp, micro_batch, seq_len, recompute, optimizer (optional: offload_optimizer,
offload_params, attention, sp).

A module that fails to import is replaced by a stand-in whose predict() returns None and whose
describe() says why, so the benchmark never crashes on a missing tool.
"""

from __future__ import annotations

import importlib

from ._common import unavailable_module

_MODULES = [
    ("accelerate_est", "accelerate estimate-memory"),
    ("deepspeed_est", "DeepSpeed ZeRO estimator"),
    ("llm_analysis_est", "llm-analysis"),
]


def _load(module: str, name: str):
    try:
        return importlib.import_module(f".{module}", __name__)
    except Exception as exc:  # noqa: BLE001 - a broken tool must not stop the benchmark
        return unavailable_module(f"{__name__}.{module}", name, f"import failed: {type(exc).__name__}: {exc}")


accelerate_est, deepspeed_est, llm_analysis_est = (_load(m, n) for m, n in _MODULES)

ESTIMATORS = [accelerate_est, deepspeed_est, llm_analysis_est]

__all__ = ["ESTIMATORS", "accelerate_est", "deepspeed_est", "llm_analysis_est"]

"""`frenzy_job.json`: what a job's artifact folder holds and how it was made (spec, final plan,
metrics, data), so a downloaded adapter or model carries its own provenance."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, Field

from frenzy.train.config import WorkerConfig

MANIFEST = "frenzy_job.json"


class Base(BaseModel):
    """The weights an adapter applies to: a local folder with weights, or the config's seeded random
    initialisation (rebuild it with frenzy.train.model.build_base(config, seed))."""

    local_folder: Optional[str] = None
    random_init_seed: Optional[int] = None
    config: dict[str, Any]


class JobManifest(BaseModel):
    format_version: int = 1
    job_id: str
    name: str
    kind: str = Field(description="peft-adapter (LoRA / QLoRA) or model (full fine-tuning, save_pretrained)")
    base: Base
    request: dict[str, Any] = Field(description="the job as submitted")
    plan: dict[str, Any] = Field(description="the final attempt's plan and its predicted memory")
    attempt: int
    step: int = Field(description="the optimizer step the weights are from (steps: the job's last)")
    steps: int
    final_loss: Optional[float]
    final_eval_loss: Optional[float]
    loss_history: list[tuple[int, float]]
    eval_history: list[tuple[int, float]]
    data_spec: Optional[dict[str, Any]] = Field(None, description="the data the job trained on (frenzy.data.DataSpec)")
    data: Optional[dict[str, Any]] = Field(None, description="what reading the data found (frenzy.data.DataReport)")
    files: list[str]
    written_at: float


def write(cfg: WorkerConfig, history: dict, data_report, files: list[str], step: int) -> Path:
    """Write the manifest into the job's artifact folder (rank 0, after the weights are in place)."""
    weights = cfg.local_weights if _has_weights(cfg) else None
    base = Base(local_folder=weights, random_init_seed=None if weights else cfg.seed, config=cfg.hf_config)
    loss, evals = history["loss"], history["eval_loss"]
    body = JobManifest(job_id=cfg.job_id, name=str(cfg.request.get("name") or cfg.model_name),
                       kind="model" if cfg.method == "full" else "peft-adapter", base=base, request=cfg.request,
                       plan=cfg.plan, attempt=cfg.attempt, step=step, steps=cfg.steps,
                       final_loss=loss[-1][1] if loss else None,
                       final_eval_loss=evals[-1][1] if evals else None, loss_history=loss, eval_history=evals,
                       data_spec=cfg.data, data=data_report.to_json() if data_report is not None else None,
                       files=sorted(files + [MANIFEST]), written_at=time.time())
    path = cfg.artifacts_dir / MANIFEST
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(body.model_dump(mode="json"), indent=2))
    os.replace(tmp, path)
    return path


def read(folder: Path) -> JobManifest:
    return JobManifest.model_validate_json((folder / MANIFEST).read_text())


def _has_weights(cfg: WorkerConfig) -> bool:
    from frenzy.core.hf_cache import has_local_weights

    return bool(cfg.local_weights) and has_local_weights(Path(cfg.local_weights))

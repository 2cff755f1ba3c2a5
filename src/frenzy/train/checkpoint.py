"""Checkpoints with torch.distributed.checkpoint (DCP) in the job's storage folder.

DCP saves sharded state with global metadata and reshards on load, so an attempt re-planned onto
a different dp x tp layout, ZeRO stage or GPU count resumes from the previous attempt's step.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

LATEST = "latest"


def latest_step(root: Path) -> int:
    marker = root / LATEST
    return int(marker.read_text().strip()) if marker.exists() else 0


def save(root: Path, step: int, model, optimizer) -> None:
    model_sd, optim_sd = get_state_dict(model, optimizer)
    folder = root / f"step-{step}"
    dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=str(folder))
    dist.barrier()
    if dist.get_rank() == 0:
        # The marker moves only after every shard is written: a crash mid-save keeps the old one.
        tmp = root / (LATEST + ".tmp")
        tmp.write_text(str(step))
        os.replace(tmp, root / LATEST)
        for old in root.glob("step-*"):
            if old != folder:
                shutil.rmtree(old, ignore_errors=True)
    dist.barrier()


def load(root: Path, model, optimizer) -> int:
    """Load the latest checkpoint into model and optimizer; returns its step (0 if none)."""
    step = latest_step(root)
    if step == 0:
        return 0
    model_sd, optim_sd = get_state_dict(model, optimizer)
    state = {"model": model_sd, "optim": optim_sd}
    dcp.load(state, checkpoint_id=str(root / f"step-{step}"))
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    return step


__all__ = ["latest_step", "load", "save", "torch"]

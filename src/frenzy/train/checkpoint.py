"""Checkpoints with torch.distributed.checkpoint (DCP) in the job's storage folder.

DCP saves sharded state with global metadata and reshards on load, so an attempt re-planned onto
a different dp x tp layout, ZeRO stage or GPU count resumes from the previous attempt's step.

Fencing: an attempt the control plane gave up on (its node's raylet died, say) may keep training for
a while on workers Ray has not reaped yet. Each attempt claims the folder when it starts (`OWNER`
holds the newest attempt number), and a save by an older attempt stops that attempt instead of
writing over the checkpoints the newer one resumes from.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict

LATEST = "latest"
OWNER = "attempt"
# Optimizer state under one key per parameter name (`param_groups.<fqn>.lr`, ...). Unflattened, the
# param groups are one object per rank under one key, so DCP keeps a single rank's: pipeline stages
# (each with its own parameters) then resumed with another stage's groups and no learning rate.
OPTIONS = StateDictOptions(flatten_optimizer_state_dict=True)


class Superseded(RuntimeError):
    """A newer attempt of the job owns its checkpoints: this one stops without writing."""


def _write_marker(path: Path, value: int) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(str(value))
    os.replace(tmp, path)


def _owner(root: Path) -> int:
    marker = root / OWNER
    return int(marker.read_text().strip()) if marker.exists() else 0


def _still_owner(root: Path, attempt: int) -> None:
    """Rank 0 reads the owner and every rank gets its answer (a collective save must not start on
    some ranks only)."""
    verdict = [_owner(root) if dist.get_rank() == 0 else 0]
    dist.broadcast_object_list(verdict, src=0)
    if verdict[0] > attempt:
        raise Superseded(f"attempt {attempt} was superseded by attempt {verdict[0]}; it stops without writing")


def claim(root: Path, attempt: int) -> None:
    """Make `attempt` the folder's owner (before loading); an older attempt's later saves stop it."""
    if dist.get_rank() == 0 and _owner(root) <= attempt:
        _write_marker(root / OWNER, attempt)
    _still_owner(root, attempt)


def latest_step(root: Path) -> int:
    marker = root / LATEST
    return int(marker.read_text().strip()) if marker.exists() else 0


def save(root: Path, step: int, model, optimizer, attempt: int) -> None:
    _still_owner(root, attempt)
    model_sd, optim_sd = get_state_dict(model, optimizer, options=OPTIONS)
    folder = root / f"step-{step}"
    dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=str(folder))
    dist.barrier()
    # The marker moves only after every shard is written (a crash mid-save keeps the old one), and
    # only while this attempt still owns the folder (a newer one may have claimed it meanwhile).
    _still_owner(root, attempt)
    if dist.get_rank() == 0:
        _write_marker(root / LATEST, step)
        for old in root.glob("step-*"):
            if old != folder:
                shutil.rmtree(old, ignore_errors=True)
    dist.barrier()


def load(root: Path, model, optimizer) -> int:
    """Load the latest checkpoint into model and optimizer; returns its step (0 if none)."""
    step = latest_step(root)
    if step == 0:
        return 0
    model_sd, optim_sd = get_state_dict(model, optimizer, options=OPTIONS)
    state = {"model": model_sd, "optim": optim_sd}
    dcp.load(state, checkpoint_id=str(root / f"step-{step}"))
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"],
                   options=OPTIONS)
    return step


__all__ = ["latest_step", "load", "save", "torch"]

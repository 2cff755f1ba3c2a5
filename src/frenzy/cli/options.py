"""Training flags shared by `frenzy memory` and `frenzy plan`, their choices (Enums for Typer), and
their parsing into domain values."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import typer

from frenzy.cli import output
from frenzy.core import catalog
from frenzy.core.errors import FrenzyError
from frenzy.core.training import (
    ALL_LINEAR, Attention, Method, Optimizer, Precision, Recompute, TrainingConfig, ZeroStage, parse_choice,
)
from frenzy.memory.ranking import RANK_FACTORIES

# The spellings parse_choice accepts, as Enums Typer shows in --help, completes and checks.
PrecisionChoice = output.choices(Precision)
MethodChoice = output.choices(Method)
OptimizerChoice = output.choices(Optimizer)
AttentionChoice = output.choices(Attention)
ZeroChoice = output.choices(ZeroStage, [str(int(m)) for m in ZeroStage])
RecomputeChoice = output.choices(Recompute, [m.name.lower() for m in Recompute])
ObjectiveChoice = output.choice_names("Objective", list(RANK_FACTORIES))


@dataclass
class TrainingFlags:
    precision: str = "bf16-mixed"
    method: str = "full"
    lora_rank: int = 8
    lora_targets: str = "q,v"
    optimizer: str = "adamw"
    attention: str = "flash"
    lora_dropout: float = 0.0

    def to_config(self) -> TrainingConfig:
        targets = tuple(t.strip() for t in self.lora_targets.split(",") if t.strip())
        if ALL_LINEAR in targets:
            targets = (ALL_LINEAR,)
        return TrainingConfig(
            precision=parse_choice(Precision, self.precision),
            method=parse_choice(Method, self.method),
            optimizer=parse_choice(Optimizer, self.optimizer),
            attention=parse_choice(Attention, self.attention),
            lora_rank=self.lora_rank,
            lora_dropout=self.lora_dropout,
            lora_targets=targets,
        )


def complete_model(incomplete: str) -> list[str]:
    """Shell completion: catalog names, whole (org/name) or short as `frenzy memory` takes them
    (llama-3.1-8b), that start with what was typed."""
    names = catalog.model_names()
    spellings = dict.fromkeys([*names, *(n.rsplit("/", 1)[-1].lower() for n in names)])
    return [n for n in spellings if n.lower().startswith(incomplete.lower())]


def complete_gpu(incomplete: str) -> list[str]:
    """Shell completion: GPU types (with the user's catalog) whose name starts with what was typed."""
    return [n for n in catalog.gpu_types() if n.lower().startswith(incomplete.lower())]


def parse_recompute(text: str) -> Recompute:
    return parse_choice(Recompute, text)


def parse_zero(value: int) -> ZeroStage:
    return parse_choice(ZeroStage, str(value))


def fail(message: str) -> typer.Exit:
    """Report a user error (what to change; JSON under --json) and return Exit(2), like a usage error."""
    return output.fail(message)


USER_ERRORS = (FrenzyError, ValueError)


GpuCatalog = Annotated[Optional[Path], typer.Option(
    "--gpu-catalog", help="YAML file of GPU rows that add to or override the bundled catalog "
                          "(default $FRENZY_GPU_CATALOG; see docs/GPUS.md)")]


def use_gpu_catalog(path: Optional[Path]) -> None:
    """Apply a command's --gpu-catalog (when given; else the top-level flag or $FRENZY_GPU_CATALOG stays)
    and load the catalog now, so that a bad file is one clean error before any work starts."""
    if path is not None:
        catalog.use_gpu_catalog(path)
    try:
        catalog.gpu_types()
    except USER_ERRORS as exc:
        raise fail(str(exc)) from None

"""What a user submits: a model and training settings, never a GPU count.

`JobRequest` is the domain value behind `POST /v1/jobs` (pydantic lives in `schemas`, at the HTTP
boundary only). It round-trips through JSON so the store keeps the request exactly as submitted
and every re-plan starts from the same input.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from frenzy.core.errors import InvalidConfigError
from frenzy.core.hf_config import arch_from_config, load_config
from frenzy.core.job import JobSpec
from frenzy.core.training import (ALL_LINEAR, Attention, Method, Optimizer, Precision, TrainingConfig,
                                  parse_choice)
from frenzy.data.spec import SUFFIXES as DATA_SUFFIXES

SYNTHETIC = "synthetic"
OBJECTIVES = ("time", "cost")
LR_SCHEDULES = ("constant", "linear", "cosine")  # transformers' get_scheduler names, with warmup

# Bounds on what a job may ask for (docs/SERVING.md "Inputs and limits" says why each is where it is).
# Each is far beyond any real training run, and small enough that no arithmetic on it runs away.
MAX_GLOBAL_BATCH = 1 << 20  # sequences per step; real runs use at most ~16 Ki (4 M tokens of 256)
MAX_SEQ_LEN = 1 << 20  # tokens per sequence: the longest context windows are 1 M tokens
MAX_STEPS = 10_000_000  # the longest published pre-training runs take ~2 M steps
MAX_TOKENS = 10**14  # 100 T: three times the largest published pre-training corpus (36 T)
MAX_EPOCHS = 1000
MAX_LORA_RANK = 1 << 14  # 16,384: the largest hidden size in the catalog (a rank cannot usefully exceed it)
MAX_GPUS = 1 << 16  # the largest clusters hold ~100 K GPUs; a job's cap beyond that means nothing
MAX_SEED = 2**32 - 1  # numpy's seeds are 32-bit
MAX_PRIORITY = 2**31 - 1  # priorities are 32-bit (the store's INTEGER column on every database)
MIN_PRIORITY = -(2**31)
MAX_GRAD_NORM = 1e6
MAX_NAME_CHARS = 200  # the store's name column; also what a table shows
MAX_PATH_CHARS = 4096  # PATH_MAX on Linux


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """Optional bounds a user may set; none of them is a GPU count to use."""

    max_gpus: int | None = None  # the planner never uses more
    gpu_types: tuple[str, ...] = ()  # allowed GPU types (empty: any in the cluster)
    max_attempts: int = 3  # attempts (OOM re-plans and lost runs included) before the job fails

    def __post_init__(self):
        if self.max_gpus is not None and not 1 <= self.max_gpus <= MAX_GPUS:
            raise InvalidConfigError(f"limits.max_gpus must be in 1..{MAX_GPUS:,}, got {self.max_gpus}; omit it to "
                                     "let Frenzy choose")
        if not 1 <= self.max_attempts <= 20:
            raise InvalidConfigError(f"limits.max_attempts must be in 1..20, got {self.max_attempts}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Emulation:
    """Fake-GPU mode only: how the worker's emulated memory peak relates to MARP's prediction.

    `peak_factor` > 1 makes a job use more memory than predicted (as fragmentation or an unmodelled
    buffer would on a real GPU), so the OOM re-plan path can be exercised on CPU.
    """

    peak_factor: float = 1.0

    def __post_init__(self):
        if not 0.1 <= self.peak_factor <= 10:
            raise InvalidConfigError(f"emulation.peak_factor must be in 0.1..10, got {self.peak_factor}")


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRequest:
    model: str | None = None  # catalog name, or a path to a config.json / a local model folder
    hf_config: dict[str, Any] | None = field(default=None, hash=False)  # an inline HF config.json
    name: str = ""
    global_batch: int = 8
    seq_len: int = 512
    steps: int | None = None
    tokens: int | None = None  # alternative to steps: train on this many tokens
    epochs: float | None = None  # alternative to steps: passes over the training examples
    micro_batch: int | None = None  # optional cap on sequences per GPU per forward
    precision: str = "bf16-mixed"
    method: str = "full"
    optimizer: str = "adamw"
    learning_rate: float = 3e-4
    lora_rank: int = 8
    lora_targets: tuple[str, ...] = ("q", "v")
    dataset: str = SYNTHETIC  # "synthetic" or a local data file (frenzy.data: docs/DATA.md)
    data_format: str = "auto"  # auto | text | prompt-completion | chat
    validation: float | str | None = None  # a held-out fraction of the rows, or a second local file
    overlong: str = "truncate"  # rows longer than seq_len: truncate | drop
    lr_schedule: str = "constant"
    warmup_steps: int = 0
    weight_decay: float = 0.0
    max_grad_norm: float | None = 1.0  # gradient clipping (None: off)
    seed: int = 0  # weights of a random-init model, data order, the validation split
    eval_every: int | None = None  # validation loss every N steps (and always at the end)
    merge_lora: bool = False  # also write the adapter merged into the (local) base weights
    export_every_checkpoint: bool = False  # refresh the artifacts at every checkpoint, not only at the end
    train_examples: int | None = None  # filled in at submission from the data (epochs -> steps)
    objective: str = "time"
    priority: int = 0
    limits: Limits = field(default_factory=Limits)
    emulation: Emulation = field(default_factory=Emulation)

    def __post_init__(self):
        if (self.model is None) == (self.hf_config is None):
            raise InvalidConfigError("give exactly one of 'model' (a catalog name or config path) or 'hf_config'")
        if self.global_batch < 1 or self.seq_len < 1:
            raise InvalidConfigError("global_batch and seq_len must be >= 1")
        lengths = [k for k in ("steps", "tokens", "epochs") if getattr(self, k) is not None]
        if not lengths:
            object.__setattr__(self, "steps", 10)
        if len(lengths) > 1:
            raise InvalidConfigError(f"give one of 'steps', 'tokens' or 'epochs', not {' and '.join(lengths)}")
        if (self.steps or 1) < 1 or (self.tokens or 1) < 1 or not 0 < (self.epochs or 1) <= MAX_EPOCHS:
            raise InvalidConfigError(f"steps and tokens must be >= 1, epochs in (0, {MAX_EPOCHS}]")
        if self.global_batch > MAX_GLOBAL_BATCH or self.seq_len > MAX_SEQ_LEN:
            raise InvalidConfigError(f"global_batch must be <= {MAX_GLOBAL_BATCH:,} and seq_len <= {MAX_SEQ_LEN:,}")
        if not MIN_PRIORITY <= self.priority <= MAX_PRIORITY:
            raise InvalidConfigError(f"priority must be in {MIN_PRIORITY:,}..{MAX_PRIORITY:,}, got {self.priority}")
        if not self.lora_targets:
            raise InvalidConfigError("lora_targets is empty; name the modules to adapt (e.g. [q, v]) or "
                                     f"'{ALL_LINEAR}', or leave it out for the default")
        if self.train_examples is not None or self.epochs is None:
            steps = self.total_steps()
            if steps > MAX_STEPS:
                raise InvalidConfigError(f"the job would run {steps:,} optimizer steps, over the {MAX_STEPS:,} "
                                         "allowed; train on fewer tokens or epochs, or raise global_batch")
        if self.micro_batch is not None and (self.micro_batch < 1 or self.global_batch % self.micro_batch):
            raise InvalidConfigError(
                f"global batch {self.global_batch} is not divisible by micro_batch {self.micro_batch}; "
                f"use a global batch that is a multiple of {self.micro_batch}, or omit micro_batch")
        if self.objective not in OBJECTIVES:
            raise InvalidConfigError(f"unknown objective '{self.objective}'; choose one of: {', '.join(OBJECTIVES)}")
        if not 0 < self.learning_rate < 1:
            raise InvalidConfigError(f"learning_rate must be in (0, 1), got {self.learning_rate}")
        self._check_data()
        self._check_optimization()

    def _check_data(self) -> None:
        for value, what in ((self.dataset, "dataset"), (self.validation, "validation")):
            if what == "dataset" and value == SYNTHETIC or not isinstance(value, str):
                continue
            # Only the name here: whether the file exists is for the server's InputPolicy to say (and only
            # under its data roots), and for the reader on a local run.
            if Path(value).suffix.lower() not in DATA_SUFFIXES:
                raise InvalidConfigError(
                    f"{what} '{value[:200]}' is not a {' / '.join(DATA_SUFFIXES)} file; give the path of such a "
                    "file (readable by the server and the workers)"
                    + (f" or '{SYNTHETIC}'" if what == "dataset" else ""))
        if self.dataset == SYNTHETIC and (self.validation is not None or self.epochs is not None):
            raise InvalidConfigError("'validation' and 'epochs' need a dataset; give 'dataset' as a local file")
        if isinstance(self.validation, float | int) and not 0 < self.validation <= 0.5:
            raise InvalidConfigError(f"validation must be a fraction in (0, 0.5] or a file, got {self.validation}")

    def _check_optimization(self) -> None:
        if self.lr_schedule not in LR_SCHEDULES:
            raise InvalidConfigError(f"unknown lr_schedule '{self.lr_schedule}'; "
                                     f"choose one of: {', '.join(LR_SCHEDULES)}")
        if self.warmup_steps < 0 or not 0 <= self.weight_decay < 1:
            raise InvalidConfigError("warmup_steps must be >= 0 and weight_decay in [0, 1)")
        if self.max_grad_norm is not None and self.max_grad_norm <= 0:
            raise InvalidConfigError("max_grad_norm must be > 0 (or null to turn clipping off)")
        if self.eval_every is not None and self.eval_every < 1:
            raise InvalidConfigError("eval_every must be >= 1 step")
        if self.merge_lora and self.method == "full":
            raise InvalidConfigError("merge_lora applies to LoRA / QLoRA jobs; a full fine-tune already exports a model")

    # ---- derived domain values ------------------------------------------------------------

    def config_and_name(self) -> tuple[dict, str]:
        """The raw HF config dict (what workers build the model from) and a display name."""
        if self.hf_config is not None:
            cfg = dict(self.hf_config)
            return cfg, str(cfg.get("_name_or_path") or self.name or cfg.get("model_type", "custom"))
        # the inputs check (frenzy.control.inputs) resolves every path to its absolute real path under
        # a data root: a relative value is a name, never a file where the server happens to run
        return load_config(self.model, paths=os.path.isabs(self.model))

    def training(self) -> TrainingConfig:
        targets = tuple(self.lora_targets)
        return TrainingConfig(precision=parse_choice(Precision, self.precision),
                              method=parse_choice(Method, self.method),
                              optimizer=parse_choice(Optimizer, self.optimizer),
                              attention=Attention.SDPA, lora_rank=self.lora_rank,
                              lora_targets=(ALL_LINEAR,) if ALL_LINEAR in targets else targets)

    def total_steps(self) -> int:
        if self.steps is not None:
            return self.steps
        if self.epochs is not None:
            if self.train_examples is None:
                raise InvalidConfigError("epochs need the data's example count, known once the data is read")
            return max(1, math.ceil(self.epochs * self.train_examples / self.global_batch))
        return max(1, math.ceil(self.tokens / (self.global_batch * self.seq_len)))

    def with_data(self, train_examples: int) -> JobRequest:
        """The request with its data's training-example count (what `epochs` is counted in)."""
        return replace(self, train_examples=train_examples)

    def job_spec(self) -> JobSpec:
        """Parse the model and settings; raises FrenzyError/ValueError with what to change."""
        cfg, name = self.config_and_name()
        return JobSpec(model=arch_from_config(cfg, name), training=self.training(), seq_len=self.seq_len,
                       global_batch=self.global_batch, steps=self.total_steps())

    def display_name(self) -> str:
        """The job's name: given, or from its model; printable and within the store's column size."""
        if self.name:
            name = self.name
        elif self.model is None:
            name = str(self.hf_config.get("_name_or_path") or self.hf_config.get("model_type", "custom"))
        else:
            path = Path(self.model)
            name = path.parent.name if path.suffix == ".json" else path.name
        name = "".join(c for c in name if c.isprintable())[:MAX_NAME_CHARS]
        return name.encode("utf-8", "replace").decode("utf-8") or "job"

    # ---- JSON round trip -------------------------------------------------------------------

    def to_json(self) -> dict:
        out = asdict(self)
        out["lora_targets"] = list(self.lora_targets)
        out["limits"]["gpu_types"] = list(self.limits.gpu_types)
        if self.train_examples is None:  # filled in by the server only: what a client sends has none
            del out["train_examples"]
        return out

    @classmethod
    def from_json(cls, data: dict) -> JobRequest:
        data = dict(data)
        limits = dict(data.pop("limits", None) or {})
        limits["gpu_types"] = tuple(limits.get("gpu_types") or ())
        emulation = dict(data.pop("emulation", None) or {})
        if "lora_targets" in data:
            targets = data["lora_targets"]
            data["lora_targets"] = tuple(targets.split(",") if isinstance(targets, str) else targets)
        known = set(cls.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            raise InvalidConfigError(f"unknown job field(s) {sorted(unknown)}; known fields: {', '.join(sorted(known))}"
                                     " (GPU counts are chosen by Frenzy, not given)")
        return cls(**data, limits=Limits(**limits), emulation=Emulation(**emulation))

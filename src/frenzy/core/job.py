"""A training job as the user states it: model and training settings, never a GPU count."""

from __future__ import annotations

from dataclasses import dataclass, field

from frenzy.core.errors import InvalidConfigError
from frenzy.core.model import ModelArch
from frenzy.core.training import TrainingConfig


@dataclass(frozen=True, slots=True, kw_only=True)
class JobSpec:
    model: ModelArch
    training: TrainingConfig = field(default_factory=TrainingConfig)
    seq_len: int
    global_batch: int = 1  # sequences per optimizer step
    steps: int = 1

    def __post_init__(self):
        if self.seq_len < 1:
            raise ValueError(f"seq_len must be >= 1, got {self.seq_len}")
        if self.global_batch < 1:
            raise ValueError(f"global_batch must be >= 1, got {self.global_batch}")
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1, got {self.steps}")
        if self.seq_len > self.model.max_position_embeddings:
            raise InvalidConfigError(
                f"sequence length {self.seq_len} exceeds the {self.model.max_position_embeddings} positions "
                f"{self.model.name} supports; use --seq <= {self.model.max_position_embeddings} or a "
                "longer-context model"
            )

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq_len

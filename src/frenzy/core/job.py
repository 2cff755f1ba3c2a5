"""A training job as the user states it: model and training settings, never a GPU count."""

from __future__ import annotations

from dataclasses import dataclass, field

from frenzy.core.errors import InvalidConfigError
from frenzy.core.hashing import fields_hash, reduce_by_fields
from frenzy.core.model import ModelArch, Positions
from frenzy.core.training import TrainingConfig


@dataclass(frozen=True, slots=True, kw_only=True)
class JobSpec:
    model: ModelArch
    training: TrainingConfig = field(default_factory=TrainingConfig)
    seq_len: int
    global_batch: int = 1  # sequences per optimizer step
    steps: int = 1
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        # frenzy.core.hashing, computed at the first use: most specs a simulation makes (one per job
        # and per re-queue of a running job) are never hashed
        if not self._hash:
            object.__setattr__(self, "_hash", fields_hash(self))
        return self._hash

    def __reduce__(self):
        return reduce_by_fields(self)  # the stored hash is this process's: frenzy.core.hashing

    def __post_init__(self):
        if self.seq_len < 1:
            raise ValueError(f"seq_len must be >= 1, got {self.seq_len}")
        if self.global_batch < 1:
            raise ValueError(f"global_batch must be >= 1, got {self.global_batch}")
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1, got {self.steps}")
        # A learned position table has max_position_embeddings rows and nothing past them. Rotary and
        # ALiBi positions are computed, so a longer sequence runs (and its memory is what we predict);
        # whether the model is any good there is a quality question, answered by context_warning.
        if self.model.positions is Positions.LEARNED and self.seq_len > self.model.max_position_embeddings:
            raise InvalidConfigError(
                f"sequence length {self.seq_len} exceeds the {self.model.max_position_embeddings} positions "
                f"{self.model.name} supports (its position embeddings are a learned table); use --seq <= "
                f"{self.model.max_position_embeddings} or a longer-context model"
            )

    def with_steps(self, steps: int) -> JobSpec:
        """This job with another step count; built directly rather than with dataclasses.replace,
        which costs twice as much where the scheduler re-queues running jobs on most calls, and
        without __init__, whose checks hold for every field but `steps`. Keep it in step with the
        fields (tests/unit/sched/test_incremental.py checks)."""
        if steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        spec, put = object.__new__(JobSpec), object.__setattr__  # a frozen dataclass's own __setattr__ refuses
        put(spec, "model", self.model)
        put(spec, "training", self.training)
        put(spec, "seq_len", self.seq_len)
        put(spec, "global_batch", self.global_batch)
        put(spec, "steps", steps)
        put(spec, "_hash", 0)
        return spec

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq_len


def context_warning(job: JobSpec) -> str | None:
    """Why the job's sequence length may hurt model quality (never memory), or None.

    Rotary and ALiBi models accept any length, but were trained up to max_position_embeddings (and
    Qwen v1 only up to seq_length, reaching further through dynamic NTK scaling). Callers print this
    on stderr and return it in JSON `warnings`; the job itself is valid.
    """
    model, seq = job.model, job.seq_len
    kind = "ALiBi" if model.positions is Positions.ALIBI else "rotary"
    if seq > model.max_position_embeddings:
        return (f"{model.name} was trained on at most {model.max_position_embeddings} positions; at {seq} tokens its "
                f"{kind} positions extrapolate. Memory is predicted for {seq}, but expect worse quality unless "
                "the config's rope_scaling extends the context or a longer-context model is used")
    if model.trained_seq_len and seq > model.trained_seq_len:
        return (f"{model.name} was pretrained on {model.trained_seq_len}-token sequences and reaches "
                f"{model.max_position_embeddings} through rope scaling; training at {seq} tokens works, "
                "but starts from a model that has not seen sequences that long")
    return None

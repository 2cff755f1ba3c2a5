"""Activations of a profiled family (no formula): a per-layer profile the tracer measured once.

`frenzy.memory.trace.profile` runs the real training step of a reduced-depth copy of the model
(every layer kind once, see `structure.reduced_layers`) on fake tensors and reads what
each decoder layer keeps for backward. Bytes a layer keeps follow the terms the physics has:

    B(mb, s) = mb * s * (a + q * s) + r * s

a part linear in tokens (a: bytes per token), where the attention materialises its scores (eager,
or an explicit mask) a part quadratic in the sequence (q), and a part that grows with the sequence
but not the batch (r: rotary cos/sin tables a layer computes for itself). Three traces - (mb 1, s1),
(mb 2, s1), (mb 1, s2) - determine a, q and r per kind; one more
under full recomputation gives the checkpoint each layer keeps. Outside the layers (token ids, the
final norm and the LM head's input) is read from the same traces. Sliding windows and attention
chunks change what attention keeps once the sequence reaches them, so s1 and s2 are taken in the
job's own regime (between the same windows), and each regime is its own profile.

Profiles are cached on disk beside the model's structure (frenzy.core.generic) and in memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from frenzy.core.errors import FrenzyError, InvalidConfigError
from frenzy.core.generic import model_folder, read_json, write_json
from frenzy.core.model import ModelArch
from frenzy.core.one_at_a_time import profiler_turn
from frenzy.core.training import TrainingConfig

PROFILE_VERSION = 7  # bump when what a profile holds or how it is measured changes


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerTerms:
    """Bytes one layer of a kind keeps: per token (a), per token per sequence position (q), per
    sequence position whatever the micro-batch (r)."""

    per_token: float
    per_token_per_seq: float
    per_position: float

    def at(self, seq: int, micro_batch: int) -> float:
        """Bytes per token of a micro-batch of `micro_batch` sequences of `seq` tokens."""
        return self.per_token + self.per_token_per_seq * seq + self.per_position / micro_batch


@dataclass(frozen=True, slots=True, kw_only=True)
class ActivationProfile:
    kinds: tuple[LayerTerms, ...]  # per layer kind, no recomputation
    checkpoint_per_token: tuple[float, ...]  # per layer kind, under full recomputation
    layer_counts: tuple[int, ...]  # how many of the model's layers are of each kind
    first_layer_delta: LayerTerms  # the first layer keeps this much more (less: negative) than its kind
    outside_per_token: float  # outside the layers: ids, labels, final norm, the LM head's input
    outside_checkpointed_per_token: float  # the same under full recomputation

    def mean_layer(self, seq: int, micro_batch: int) -> float:
        layers = zip(self.layer_counts, self.kinds)
        return sum(n * k.at(seq, micro_batch) for n, k in layers) / sum(self.layer_counts)

    def widest_layer(self, seq: int, micro_batch: int) -> float:
        return max(k.at(seq, micro_batch) for k in self.kinds)

    def mean_checkpoint(self) -> float:
        return sum(n * c for n, c in zip(self.layer_counts, self.checkpoint_per_token)) / sum(self.layer_counts)


def windows(arch: ModelArch) -> list[int]:
    """Sequence lengths at which attention changes what it keeps (sliding windows, attention chunks)."""
    return sorted({w for w in (arch.sliding_window, arch.attention_chunk) if w > 0})


def sample_sequences(bounds: list[int], seq: int) -> tuple[int, int, int]:
    """(regime, s1, s2): two sequence lengths between the same `bounds` (windows) as `seq`."""
    regime = sum(1 for w in bounds if w <= seq)
    low = bounds[regime - 1] if regime else 0
    high = bounds[regime] if regime < len(bounds) else None
    if low == 0:
        s1 = max(8, min(256, (high or 1024) // 4))
    else:
        s1 = low
    s2 = 2 * s1 if high is None or 2 * s1 < high else (s1 + high) // 2
    return regime, s1, max(s2, s1 + 1)


def settings_key(training: TrainingConfig) -> str:
    """What changes a layer's activations: precision, method, adapters, attention (not the optimizer)."""
    targets = ",".join(sorted(training.trainable_targets))
    return (f"{training.precision.value}-{training.method.value}-r{training.lora_rank}-{targets}"
            f"-d{training.lora_dropout}-{training.attention.value}")


def activation_profile(arch: ModelArch, training: TrainingConfig, seq: int) -> ActivationProfile:
    regime, s1, s2 = sample_sequences(windows(arch), seq)
    return _profile(arch.profile_key, training, regime, s1, s2)


@lru_cache(maxsize=256)
def _profile(key: str, training: TrainingConfig, regime: int, s1: int, s2: int) -> ActivationProfile:
    folder = model_folder(key)
    path = folder / f"profile-v{PROFILE_VERSION}-{settings_key(training)}-w{regime}.json"
    data = read_json(path)
    if data is None:
        with profiler_turn():
            data = read_json(path)  # measured while this caller waited?
            if data is None:
                data = _measure(folder, training, s1, s2)
                write_json(path, data)
    return ActivationProfile(
        kinds=tuple(LayerTerms(**k) for k in data["kinds"]),
        checkpoint_per_token=tuple(data["checkpoint_per_token"]),
        layer_counts=tuple(data["layer_counts"]),
        first_layer_delta=LayerTerms(**data["first_layer_delta"]),
        outside_per_token=data["outside_per_token"],
        outside_checkpointed_per_token=data["outside_checkpointed_per_token"],
    )


def _measure(folder, training: TrainingConfig, s1: int, s2: int) -> dict:
    try:
        from frenzy.memory.trace.profile import measure
    except ImportError as exc:
        raise ValueError(f"profiling a family without a formula needs PyTorch and transformers "
                         f"({exc.name} is missing): pip install 'frenzy[trace]'") from None
    try:
        return measure(str(folder / "config.json"), training, s1, s2)
    except FrenzyError:
        raise
    except Exception as exc:  # the real training step of a request's config: any failure is the config's
        raise InvalidConfigError(
            f"the training step of this {read_json(folder / 'structure.json')['model_type']} model could not "
            f"be traced to profile its activations ({type(exc).__name__}: {exc}); plan it with a config "
            "of a family Frenzy has formulas for") from exc

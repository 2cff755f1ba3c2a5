"""Measure the activation profile of a family without a formula (see frenzy.memory.profiled).

Four traces of a reduced-depth copy (each layer kind once, see structure.reduced_layers): (mb 1, s1),
(mb 2, s1) and (mb 1, s2) without recomputation, and (mb 1, s1) under full recomputation. Layer i
keeps what the measured step's first forward adds between the marks `layer_pre.i` and
`layer_pre.i+1`; what the forward keeps outside the layers is the rest of what is alive when
backward starts. A kind's bytes are read from its last kept layer that another layer follows (not
the model's first layer, whose input may not require grad, nor the last, whose output the final
norm reads); the first layer's difference is kept separately.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from frenzy.core.plan import ParallelPlan
from frenzy.core.training import Recompute, TrainingConfig
from frenzy.memory.trace.replay import replay
from frenzy.memory.trace.step import LAYER_POST, LAYER_PRE
from frenzy.memory.trace.structure import reduced_layers
from frenzy.memory.trace.tracer import record_steps

ACTIVATIONS = "activations"


def _growth(config_path: str, training: TrainingConfig, keep: list[int], micro_batch: int, seq: int,
            recompute: Recompute, whole_prefix: bool) -> tuple[list[int], int]:
    """(bytes each kept layer keeps, bytes kept outside the layers) for one traced step of the copy
    holding only the `keep` layers, or with `whole_prefix` every layer up to the last of them."""
    plan = ParallelPlan(micro_batch=micro_batch, recompute=recompute)
    # one step: what a forward keeps does not depend on optimizer state
    log = record_steps(config_path, training, plan, seq, keep_layers=keep, steps=1, whole_prefix=whole_prefix).log
    marks = replay(log, 0).at_marks
    traced = max(keep) + 1 if whole_prefix else len(keep)
    # from one layer's start to the next one's: the loop frees the previous hidden state only when
    # it takes the layer's output, after the layer has returned. A layer the step skips (Mllama's
    # cross-attention layers without an image) leaves no mark and keeps nothing: its start is the
    # next layer's.
    starts = {i: marks[f"{LAYER_PRE}.{i}"][ACTIVATIONS] for i in range(traced) if f"{LAYER_PRE}.{i}" in marks}
    edges = [marks[f"{LAYER_POST}.{max(starts)}"][ACTIVATIONS]]
    for i in reversed(range(traced)):
        edges.insert(0, starts.get(i, edges[0]))
    every = [after - before for before, after in zip(edges, edges[1:])]
    total = marks["step0.backward"][ACTIVATIONS] - marks["step0.forward"][ACTIVATIONS]
    return [every[i] for i in keep] if whole_prefix else every, total - sum(every)


def _terms(b11: float, b21: float, b12: float, s1: int, s2: int) -> dict:
    """a, q and r of B(mb, s) = mb * s * (a + q * s) + r * s from B(1, s1), B(2, s1), B(1, s2)."""
    per_token_1 = (b21 - b11) / s1  # a + q * s1
    per_position = (b11 - (b21 - b11)) / s1  # r: what one sequence position adds whatever the batch
    per_token_2 = (b12 - per_position * s2) / s2  # a + q * s2
    q = (per_token_2 - per_token_1) / (s2 - s1)
    return {"per_token": per_token_1 - q * s1, "per_token_per_seq": q, "per_position": per_position}


def measure(config_path: str, training: TrainingConfig, s1: int, s2: int) -> dict:
    """The profile of the model whose cached config is `config_path` (its structure.json beside it)."""
    structure = json.loads((Path(config_path).parent / "structure.json").read_text())
    kinds = structure["layer_kinds"]
    keep = reduced_layers(kinds)
    kept_kinds = [kinds[i] for i in keep]
    # the last kept layer of each kind that another layer follows speaks for the kind
    speaker = {kind: position for position, kind in enumerate(kept_kinds)}
    speaker.update({kind: position for position, kind in enumerate(kept_kinds[:-1])})
    try:
        first = _growth(config_path, training, keep, 1, s1, Recompute.NONE, whole_prefix=False)
        whole_prefix = False
    except Exception:  # noqa: BLE001 - a copy without the layers between fails in family-specific ways
        # Some families size modules by the layer count (Gemma 4's per-layer input embeddings pack
        # one slice per layer), so a copy missing the layers in between cannot run: trace every
        # layer up to the last kept one instead (slower; the kept layers are read the same way).
        first = _growth(config_path, training, keep, 1, s1, Recompute.NONE, whole_prefix=True)
        whole_prefix = True
    points = {(1, s1): first, **{(mb, s): _growth(config_path, training, keep, mb, s, Recompute.NONE, whole_prefix)
                                 for mb, s in ((2, s1), (1, s2))}}
    if structure["recompute"]:
        checkpoint, checkpoint_rest = _growth(config_path, training, keep, 1, s1, Recompute.FULL, whole_prefix)
    else:  # a family transformers cannot checkpoint: its recomputing plans are not run
        # (frenzy.core.worker_support), and are priced as keeping everything
        checkpoint, checkpoint_rest = first

    def fit(read) -> dict:
        return _terms(*(read(*points[p]) for p in ((1, s1), (2, s1), (1, s2))), s1, s2)

    counts = Counter(kinds)
    first = kept_kinds[0]
    outside = fit(lambda layers, rest: rest)
    return {
        "kinds": [fit(lambda layers, rest, k=k: layers[speaker[k]]) for k in range(len(counts))],
        "checkpoint_per_token": [checkpoint[speaker[k]] / s1 for k in range(len(counts))],
        "layer_counts": [counts[k] for k in range(len(counts))],
        "first_layer_delta": fit(lambda layers, rest: layers[0] - layers[speaker[first]]),
        "outside_per_token": outside["per_token"] + outside["per_token_per_seq"] * s1,
        "outside_checkpointed_per_token": checkpoint_rest / s1,
        "sampled": {"layers": keep, "s1": s1, "s2": s2},
    }

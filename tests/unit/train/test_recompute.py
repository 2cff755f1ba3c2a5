"""Selective activation checkpointing as the worker runs it (frenzy.train.recompute): the same
loss and gradients as no recomputation, no projection re-run in backward (SAC's cache serves them)
while the cheap ops are, and a measured step between no and full recomputation."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from frenzy.train.config import WorkerConfig
from frenzy.train.model import build_model
from frenzy.train.recompute import enable_recompute
from tests.unit.train.dist_helpers import SMALL_LLAMA, base_config, run_world

MODES = ("none", "selective", "full")
LAYERS = SMALL_LLAMA["num_hidden_layers"]
# Full recomputation re-runs a layer's forward only as far as backward needs tensors of it
# (non-reentrant checkpoint's early stop): up to down's input, so q, k, v, o, gate, up but not down.
PROJECTIONS_RERUN_PER_LAYER = 6


class OpCounter(TorchDispatchMode):
    """Counts aten ops by name while active."""

    def __init__(self):
        super().__init__()
        self.counts: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        self.counts[name] = self.counts.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


def _model(tmp_path, mode: str):
    cfg = WorkerConfig.from_json(base_config(tmp_path, recompute=mode))
    model = build_model(cfg)  # seeded: every mode starts from the same weights
    model.train()
    return model


def _batch(seq: int = 32, batch: int = 2):
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, SMALL_LLAMA["vocab_size"], (batch, seq), generator=gen)
    return ids, ids.clone()


def _run(model):
    ids, labels = _batch()
    loss = model(input_ids=ids, labels=labels).loss
    with OpCounter() as backward_ops:
        loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    return float(loss), grads, backward_ops.counts


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("recompute")
    return {mode: _run(_model(tmp, mode)) for mode in MODES}


@pytest.mark.parametrize("mode", ["selective", "full"])
def test_recomputation_gives_the_loss_and_gradients_of_none(runs, mode):
    loss, grads, _ = runs[mode]
    ref_loss, ref_grads, _ = runs["none"]
    assert loss == pytest.approx(ref_loss, rel=1e-6)
    assert grads.keys() == ref_grads.keys()
    for name, grad in grads.items():
        torch.testing.assert_close(grad, ref_grads[name], rtol=1e-5, atol=1e-7, msg=name)


def test_selective_reruns_no_projection_but_the_pointwise_ops(runs):
    """Full recomputation re-runs each layer's projections in backward; SAC serves them from its
    cache, so backward runs exactly the matmuls of no recomputation; the SiLU and the RMSNorms'
    rsqrt are re-run under both."""
    def matmuls(counts):
        return counts.get("mm", 0) + counts.get("addmm", 0)

    none, selective, full = (runs[m][2] for m in MODES)
    assert matmuls(full) == matmuls(none) + PROJECTIONS_RERUN_PER_LAYER * LAYERS
    assert matmuls(selective) == matmuls(none)
    for op in ("silu", "rsqrt"):
        assert none.get(op, 0) == 0
        assert selective.get(op, 0) == full.get(op, 0) > 0, op


def test_an_unknown_mode_is_refused_with_the_choices(tmp_path):
    model = _model(tmp_path, "none")
    with pytest.raises(ValueError, match="none, selective, full"):
        enable_recompute(model, "attention")


@pytest.mark.slow
def test_the_measured_step_lies_between_none_and_full(tmp_path):
    """The worker's own measurement (StepMeter, live tensor bytes of the step) on a gloo rank, with
    activations large enough to set the peak: full < selective < none, at the same losses."""
    peaks, losses = {}, {}
    for mode in MODES:
        cfg = base_config(tmp_path / mode, recompute=mode, seq_len=128, micro_batch=4, grad_accum=1,
                          global_batch=4, steps=2, checkpoint_every=10)
        result = run_world(cfg, 1, tmp_path / mode)[0]
        assert "error" not in result, result
        peaks[mode] = max(r["peak_bytes"] for r in result["reports"])
        losses[mode] = [r["loss"] for r in result["reports"]]
        assert result["reports"][-1]["peak_source"] == "measured-cpu"
    assert peaks["full"] < peaks["selective"] < peaks["none"], peaks
    assert losses["selective"] == pytest.approx(losses["none"], rel=1e-5)
    assert losses["full"] == pytest.approx(losses["none"], rel=1e-5)

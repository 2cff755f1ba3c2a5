"""The optimisation settings a fine-tune takes: the learning-rate schedule against its closed form
(linear warmup, then constant / linear / cosine decay), resumed attempts on the same curve, and
weight decay only on matrices."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from frenzy.train.config import WorkerConfig
from frenzy.train.optimization import clip_gradients, make_optimizer, make_schedule
from tests.unit.train.dist_helpers import base_config

LR, WARMUP, STEPS = 1e-3, 3, 12


def _expected(name: str, step: int) -> float:
    """The lr of optimizer step `step` (0-based: the value used by the step after `step` updates)."""
    if step < WARMUP:
        return LR * step / WARMUP
    progress = (step - WARMUP) / (STEPS - WARMUP)
    return LR * {"constant": 1.0, "linear": 1 - progress, "cosine": 0.5 * (1 + math.cos(math.pi * progress))}[name]


def _cfg(tmp_path, **over) -> WorkerConfig:
    return WorkerConfig.from_json(base_config(tmp_path, learning_rate=LR, warmup_steps=WARMUP, steps=STEPS, **over))


@pytest.mark.parametrize("name", ["constant", "linear", "cosine"])
def test_schedule_follows_its_closed_form_and_resumes_on_it(tmp_path, name):
    cfg = _cfg(tmp_path, lr_schedule=name)
    model = nn.Linear(4, 4)
    optimizer = make_optimizer(model, cfg)
    schedule = make_schedule(optimizer, cfg, 0)
    seen = []
    for _ in range(STEPS):
        seen.append(schedule.get_last_lr()[0])
        optimizer.step()
        schedule.step()
    assert seen == pytest.approx([_expected(name, s) for s in range(STEPS)], abs=1e-12)
    resumed = make_schedule(make_optimizer(model, cfg), cfg, 5)  # an attempt re-planned after step 5
    assert resumed.get_last_lr()[0] == pytest.approx(_expected(name, 5), abs=1e-12)


def test_weight_decay_spares_biases_and_norm_scales(tmp_path):
    model = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8), nn.Linear(8, 2))
    groups = make_optimizer(model, _cfg(tmp_path, weight_decay=0.1)).param_groups
    decayed = {id(p) for g in groups if g["weight_decay"] == 0.1 for p in g["params"]}
    assert decayed == {id(model[0].weight), id(model[2].weight)}
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))


def test_clipping_bounds_the_global_norm(tmp_path):
    model = nn.Linear(16, 16)
    (model(torch.full((4, 16), 100.0)).sum()).backward()
    before = torch.cat([p.grad.flatten() for p in model.parameters()]).norm().item()
    assert clip_gradients(model, _cfg(tmp_path, max_grad_norm=1.0)) == pytest.approx(before, rel=1e-5)
    after = torch.cat([p.grad.flatten() for p in model.parameters()]).norm().item()
    assert before > 1.0 and after == pytest.approx(1.0, rel=1e-4)
    assert clip_gradients(model, _cfg(tmp_path, max_grad_norm=None)) is None

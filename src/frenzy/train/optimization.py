"""Optimizer, learning-rate schedule and gradient clipping, as users of HF Trainer / TRL expect them.

Weight decay applies to matrices only: biases and norm scales are left undecayed (decaying a norm's
scale towards zero only shrinks the layer's output; HF Trainer and torchtune exclude them too).
The schedule is transformers' `get_scheduler` (constant / linear / cosine after a linear warmup),
stepped once per optimizer step; a resumed attempt fast-forwards it to its step, so the learning
rate does not depend on where a job was re-planned.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from frenzy.train.config import WorkerConfig


def make_optimizer(model: nn.Module, cfg: WorkerConfig) -> torch.optim.Optimizer:
    trainable = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in trainable if p.ndim >= 2], "weight_decay": cfg.weight_decay},
              {"params": [p for p in trainable if p.ndim < 2], "weight_decay": 0.0}]
    groups = [g for g in groups if g["params"]]
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=cfg.learning_rate, momentum=0.9)
    # adamw-8bit needs bitsandbytes on CUDA; on CPU and without it the fp32 AdamW runs instead.
    # foreach (one kernel over a list of tensors) is AdamW's default on CUDA and what MARP models;
    # on CPU torch would loop per tensor, so a fake GPU asks for it explicitly to step like the card.
    # Not under tensor parallelism: its DTensor projections beside plain replicated norms are a mix
    # that foreach kernels refuse (on CUDA too).
    return torch.optim.AdamW(groups, lr=cfg.learning_rate, **_kernels(cfg))


def _kernels(cfg: WorkerConfig) -> dict:
    fused = cfg.optimizer == "adamw-fused" and torch.cuda.is_available()
    return {"fused": fused, "foreach": not fused and cfg.tp == 1}


def suit_plan(optimizer: torch.optim.Optimizer, cfg: WorkerConfig) -> None:
    """After resuming: a checkpoint's param groups carry the kernels of the plan that saved them, and a
    re-planned attempt may be laid out differently (tensor parallel now, say)."""
    if isinstance(optimizer, torch.optim.AdamW):
        for group in optimizer.param_groups:
            group.update(_kernels(cfg))


def make_schedule(optimizer: torch.optim.Optimizer, cfg: WorkerConfig, done_steps: int):
    from transformers import get_scheduler

    name = "constant_with_warmup" if cfg.lr_schedule == "constant" else cfg.lr_schedule
    schedule = get_scheduler(name, optimizer, num_warmup_steps=min(cfg.warmup_steps, cfg.steps),
                             num_training_steps=cfg.steps)
    with warnings.catch_warnings():  # fast-forwarding steps no optimizer took is the point here
        warnings.simplefilter("ignore", UserWarning)
        for _ in range(done_steps):
            schedule.step()
    return schedule


def clip_gradients(model: nn.Module, cfg: WorkerConfig) -> float | None:
    """Clip the global gradient norm over every rank's shards; returns the norm before clipping, or
    None when clipping is off. Sharded (DTensor) gradients and plain ones (a tensor-parallel plan
    leaves norms and embeddings replicated) are normed apart, as torch's norm ops refuse a mix."""
    if cfg.max_grad_norm is None:
        return None
    params = [p for p in model.parameters() if p.grad is not None]
    total = gradient_square_sum(params).sqrt()
    torch.nn.utils.clip_grads_with_norm_(params, cfg.max_grad_norm, total.float(), foreach=False)
    return float(total)


def gradient_square_sum(params: list) -> torch.Tensor:
    """The squared L2 norm (float64, on CPU) of the gradients of `params`, over every rank's shards
    (collective over a DTensor's mesh)."""
    from torch.distributed.tensor import DTensor

    squares = torch.zeros((), dtype=torch.float64)
    for sharded in (True, False):
        grads = [p.grad for p in params if isinstance(p.grad, DTensor) == sharded]
        if grads:
            norm = torch.nn.utils.get_total_norm(grads, foreach=False)
            norm = norm.full_tensor() if isinstance(norm, DTensor) else norm
            squares += norm.double().cpu() ** 2
    return squares

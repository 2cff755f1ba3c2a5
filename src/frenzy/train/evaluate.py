"""Validation loss: the mean over every loss token of the validation set, on all data-parallel ranks.

The same function scores a reloaded artifact (the demo, the tests), so "the loss the job reported"
and "the loss of what the user downloaded" are computed the same way.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from frenzy.train.batches import loss_tokens


@torch.no_grad()
def validation_loss(model: nn.Module, chunks, device: torch.device, precision) -> float | None:
    """Token-weighted mean loss over `chunks` of (input_ids, labels) (this rank's share); summed over
    the ranks of the default process group when there is one. `precision` is a context factory (the
    training step's autocast or none). None when there is nothing to score."""
    was_training = model.training
    model.eval()
    total = torch.zeros(2, dtype=torch.float64, device=device)  # (loss sum, tokens)
    try:
        for ids, labels in chunks:
            ids, labels = ids.to(device), labels.to(device)
            tokens = int(loss_tokens(labels).sum())
            with precision():
                loss = model(input_ids=ids, labels=labels).loss
            if tokens:
                total += torch.stack([loss.double() * tokens, torch.tensor(tokens, dtype=torch.float64, device=device)])
    finally:
        model.train(was_training)
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(total)
    return float(total[0] / total[1]) if total[1] > 0 else None

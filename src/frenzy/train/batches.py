"""Micro-batches for one data-parallel rank, from a prepared data set (frenzy.data) or synthetic tokens.

Every rank prepares the same examples (the preparation is deterministic), so each knows the whole
step: which examples it trains on and how many loss tokens the global batch holds. The loss is
normalised by that global count, as if the whole batch were one forward: a micro-batch with few
completion tokens weighs less than one with many (a mean of per-micro-batch means would not).

Example order: a seeded permutation per epoch, indexed by the global position of a sequence in the
run, so a job resumed on a different dp x micro-batch layout trains on the examples it has not seen.
"""

from __future__ import annotations

import numpy as np
import torch

from frenzy.train.config import WorkerConfig

IGNORE = -100  # label of positions without loss (transformers' ignore_index)


def loss_tokens(labels):
    """Per row (of a numpy array or a tensor), the positions a causal LM's loss counts: labels are
    shifted by one (position t predicts label t + 1), so the first label never counts."""
    return (labels[:, 1:] != IGNORE).sum(axis=1)


class Batches:
    def __init__(self, cfg: WorkerConfig, vocab_size: int, dp_rank: int, prepared=None):
        self.cfg, self.vocab, self.dp_rank = cfg, vocab_size, dp_rank
        self.train = prepared.train if prepared is not None else None
        self.validation = prepared.validation if prepared is not None and len(prepared.validation.input_ids) else None
        self._counts = loss_tokens(self.train.labels) if self.train is not None else None
        self._orders: dict[int, np.ndarray] = {}

    def _example(self, position: int) -> int:
        n = len(self.train.input_ids)
        epoch, offset = divmod(position, n)
        if epoch not in self._orders:
            self._orders[epoch] = np.random.default_rng((self.cfg.seed, epoch)).permutation(n)
        return int(self._orders[epoch][offset])

    def _positions(self, step: int, micro: int, dp_rank: int) -> range:
        cfg = self.cfg
        first = (step - 1) * cfg.global_batch + (micro * cfg.dp + dp_rank) * cfg.micro_batch
        return range(first, first + cfg.micro_batch)

    def get(self, step: int, micro: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(input_ids, labels) of this rank's micro-batch, [micro_batch, seq_len] each."""
        positions = self._positions(step, micro, self.dp_rank)
        if self.train is None:
            gen = torch.Generator().manual_seed(self.cfg.seed * 1_000_003 + positions[0])
            ids = torch.randint(0, self.vocab, (self.cfg.micro_batch, self.cfg.seq_len), generator=gen)
            return ids, ids.clone()  # labels are their own tensor, as for real data (and as MARP counts)
        rows = [self._example(p) for p in positions]
        return torch.from_numpy(self.train.input_ids[rows]), torch.from_numpy(self.train.labels[rows])

    def step_loss_tokens(self, step: int) -> int:
        """Loss tokens of the whole global batch of `step` (every rank, every micro-batch)."""
        first = (step - 1) * self.cfg.global_batch
        if self.train is None:
            return self.cfg.global_batch * (self.cfg.seq_len - 1)
        return int(sum(self._counts[self._example(p)] for p in range(first, first + self.cfg.global_batch)))

    def eval_chunks(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """This rank's share of the validation set in micro-batches. Every rank gets the same number
        of chunks (a sharded forward is collective): short ranks run an all-ignored chunk."""
        if self.validation is None:
            return []
        cfg, ids, labels = self.cfg, self.validation.input_ids, self.validation.labels
        mine = np.arange(self.dp_rank, len(ids), cfg.dp)
        per_rank = -(-len(ids) // cfg.dp)
        chunks = []
        for start in range(0, per_rank, cfg.micro_batch):
            rows = mine[start:start + cfg.micro_batch]
            if len(rows):
                chunks.append((torch.from_numpy(ids[rows]), torch.from_numpy(labels[rows])))
            else:
                chunks.append((torch.from_numpy(ids[:1]), torch.full_like(torch.from_numpy(labels[:1]), IGNORE)))
        return chunks

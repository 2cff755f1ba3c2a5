"""Training batches: a local text / JSONL file tokenised with the model's tokenizer when one is
available locally (never downloaded), else byte-level ids; or synthetic tokens."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from frenzy.train.config import WorkerConfig


def _text(path: Path) -> str:
    if path.suffix in (".jsonl", ".json"):
        texts = []
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                texts.append(row.get("text") or row.get("content") or json.dumps(row) if isinstance(row, dict)
                             else str(row))
        return "\n".join(texts)
    return path.read_text()


def _tokenize(text: str, cfg: WorkerConfig, vocab: int) -> torch.Tensor:
    if cfg.local_weights:
        try:
            from transformers import AutoTokenizer
            tok = AutoTokenizer.from_pretrained(cfg.local_weights, local_files_only=True)
            return torch.tensor(tok(text)["input_ids"], dtype=torch.long) % vocab
        except (OSError, ValueError):
            pass  # no tokenizer files next to the weights: fall back to bytes
    return torch.tensor(list(text.encode("utf-8")), dtype=torch.long) % vocab


class Batches:
    """Micro-batches for one data-parallel rank: [micro_batch, seq_len] token ids, deterministic in
    (seed, step, micro-batch, rank) so a resumed job sees the batches it has not trained on yet."""

    def __init__(self, cfg: WorkerConfig, vocab_size: int, dp_rank: int):
        self.cfg, self.vocab, self.dp_rank = cfg, vocab_size, dp_rank
        self.tokens = None
        if cfg.dataset != "synthetic":
            self.tokens = _tokenize(_text(Path(cfg.dataset).expanduser()), cfg, vocab_size)
            if self.tokens.numel() < cfg.seq_len + 1:
                raise ValueError(f"dataset {cfg.dataset} has fewer than {cfg.seq_len + 1} tokens; "
                                 "use a longer file or a shorter seq_len")

    def get(self, step: int, micro: int) -> torch.Tensor:
        cfg = self.cfg
        index = ((step * cfg.grad_accum + micro) * cfg.dp + self.dp_rank) * cfg.micro_batch
        if self.tokens is None:
            gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + index)
            return torch.randint(0, self.vocab, (cfg.micro_batch, cfg.seq_len), generator=gen)
        span = self.tokens.numel() - cfg.seq_len
        starts = [((index + i) * cfg.seq_len) % span for i in range(cfg.micro_batch)]
        return torch.stack([self.tokens[s:s + cfg.seq_len] for s in starts])

"""How a prepared data set is cut into micro-batches: every example once per epoch whatever the
dp x micro-batch layout, the step's loss-token count is that of the rows the ranks actually get,
and every rank runs the same number of validation forwards (a sharded forward is collective)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from frenzy.data.prepare import prepare
from frenzy.data.spec import DataSpec
from frenzy.data.tokenizer import load_tokenizer
from frenzy.train.batches import Batches
from frenzy.train.config import WorkerConfig
from tests.unit.train.dist_helpers import SMALL_LLAMA, base_config

ROWS = 23


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "chat.jsonl"
    rows = [{"messages": [{"role": "user", "content": f"question {i} " + "x" * (i % 7)},
                          {"role": "assistant", "content": f"answer {i} " + "y" * (i * 3 % 11)}]} for i in range(ROWS)]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    spec = DataSpec.from_json({"path": str(path), "validation": 0.2, "seed": 3})
    return prepare(spec, load_tokenizer(None, SMALL_LLAMA), 64)


def _layout(tmp_path, dp, mb, ga):
    return WorkerConfig.from_json(base_config(tmp_path, dp=dp, micro_batch=mb, grad_accum=ga, global_batch=dp * mb * ga,
                                              seq_len=64, seed=3))


def _row_ids(examples) -> dict[bytes, int]:
    return {row.tobytes(): i for i, row in enumerate(examples.input_ids)}


@pytest.mark.parametrize("dp, mb, ga", [(1, 4, 1), (2, 1, 2), (4, 1, 1)])
def test_an_epoch_sees_every_example_once_and_counts_its_loss_tokens(tmp_path, prepared, dp, mb, ga):
    cfg = _layout(tmp_path, dp, mb, ga)
    ranks = [Batches(cfg, SMALL_LLAMA["vocab_size"], r, prepared) for r in range(dp)]
    index = _row_ids(prepared.train)
    n = len(prepared.train)
    seen = []
    for step in range(1, n // cfg.global_batch + 1):
        labels = []
        for b in ranks:
            for micro in range(ga):
                ids, lab = b.get(step, micro)
                seen += [index[row.numpy().tobytes()] for row in ids]
                labels.append(lab.numpy())
        counted = int((np.concatenate(labels)[:, 1:] != -100).sum())
        assert all(b.step_loss_tokens(step) == counted for b in ranks)
    assert len(seen) == len(set(seen)) == n - n % cfg.global_batch


def test_layouts_with_the_same_global_batch_train_on_the_same_examples_per_step(tmp_path, prepared):
    def step_rows(dp, mb, ga, step):
        cfg = _layout(tmp_path, dp, mb, ga)
        index = _row_ids(prepared.train)
        return sorted(index[row.numpy().tobytes()] for r in range(dp) for m in range(ga)
                      for row in Batches(cfg, 512, r, prepared).get(step, m)[0])
    assert step_rows(1, 4, 1, 3) == step_rows(2, 1, 2, 3) == step_rows(4, 1, 1, 3)


@pytest.mark.parametrize("dp, mb", [(1, 2), (2, 2), (3, 1), (4, 4)])
def test_every_rank_runs_as_many_validation_forwards_and_all_rows_are_scored_once(tmp_path, prepared, dp, mb):
    cfg = _layout(tmp_path, dp, mb, 1)
    chunks = [Batches(cfg, 512, r, prepared).eval_chunks() for r in range(dp)]
    assert len({len(c) for c in chunks}) == 1
    index = _row_ids(prepared.validation)
    scored = [index[row.numpy().tobytes()] for rank in chunks for ids, labels in rank
              for row, lab in zip(ids, labels) if (lab != -100).any()]
    assert sorted(scored) == list(range(len(prepared.validation)))


def test_synthetic_tokens_count_every_position_but_the_first(tmp_path):
    cfg = _layout(tmp_path, 2, 2, 1)
    batches = Batches(cfg, 512, 0)
    ids, labels = batches.get(1, 0)
    assert ids.shape == (2, 64) and torch.equal(labels, ids) and int(ids.max()) < 512
    assert batches.step_loss_tokens(1) == 4 * 63 and batches.eval_chunks() == []

"""The training loop on chat data (local gloo ranks, as Ray Train runs it): the loss is the mean over
the global batch's loss tokens whatever the dp x micro-batch layout (checked against a plain
cross-entropy over the same rows, computed here), and the artifact the job writes scores the job's
validation set as the job reported."""

from __future__ import annotations


import pytest
import torch
import torch.nn.functional as F

from frenzy.train.reload import reload_and_evaluate
from tests.unit.train.dist_helpers import SMALL_LLAMA, base_config, run_world

pytestmark = pytest.mark.slow


def _config(tmp_path, chat_file, **layout):
    data = {"path": chat_file, "format": "chat", "validation": 0.2, "overlong": "truncate", "seed": 0}
    return base_config(tmp_path, data=data, dataset=chat_file, steps=2, global_batch=4, seq_len=128,
                       learning_rate=0.05, max_grad_norm=None, optimizer="sgd", request={"seq_len": 128}, **layout)


def _step_one_reference(cfg: dict) -> float:
    """Token-mean cross-entropy of step 1's rows, from the seeded initial weights, without HF's loss."""
    from frenzy.data.prepare import prepare
    from frenzy.data.spec import DataSpec
    from frenzy.data.tokenizer import load_tokenizer
    from frenzy.train.batches import Batches
    from frenzy.train.config import WorkerConfig
    from frenzy.train.model import build_base

    worker = WorkerConfig.from_json(dict(cfg, dp=1, micro_batch=4, grad_accum=1))
    data = prepare(DataSpec.from_json(cfg["data"]), load_tokenizer(None, SMALL_LLAMA), 128)
    ids, labels = Batches(worker, SMALL_LLAMA["vocab_size"], 0, data).get(1, 0)
    logits = build_base(SMALL_LLAMA, cfg["seed"] if "seed" in cfg else 0)(input_ids=ids).logits
    return float(F.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten(), ignore_index=-100))


def test_loss_is_per_loss_token_of_the_global_batch_in_every_layout(tmp_path, chat_file):
    layouts = [dict(dp=1, micro_batch=4, grad_accum=1), dict(dp=1, micro_batch=1, grad_accum=4),
               dict(dp=2, micro_batch=1, grad_accum=2, zero=0)]
    losses = []
    for i, layout in enumerate(layouts):
        folder = tmp_path / f"layout{i}"
        folder.mkdir()
        result = run_world(_config(folder, chat_file, **layout), layout["dp"], folder)[0]
        assert "error" not in result, result["error"]
        losses.append([r["loss"] for r in result["reports"]])
    with torch.no_grad():
        reference = _step_one_reference(_config(tmp_path, chat_file))
    assert losses[0][0] == pytest.approx(reference, rel=1e-5)
    for other in losses[1:]:  # same loss before and after one SGD step: the same gradient
        assert other == pytest.approx(losses[0], rel=1e-5)


def test_the_exported_adapter_scores_the_validation_set_as_the_job_reported(tmp_path, chat_file):
    cfg = _config(tmp_path, chat_file, dp=2, micro_batch=1, grad_accum=2, zero=3, method="lora", eval_every=1)
    result = run_world(cfg, 2, tmp_path)[0]
    assert "error" not in result, result["traceback"]
    evals = [r["eval_loss"] for r in result["reports"]]
    assert len(evals) == 2
    reloaded = reload_and_evaluate(tmp_path / "artifacts")
    assert reloaded.kind == "peft-adapter" and reloaded.trainer_eval_loss == pytest.approx(evals[-1], abs=1e-5)
    assert reloaded.reloaded_eval_loss == pytest.approx(reloaded.trainer_eval_loss, abs=1e-5)

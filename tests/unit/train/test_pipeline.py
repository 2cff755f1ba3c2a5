"""Pipeline stages (torch.distributed.pipelining, 1F1B) in the training worker, on local gloo ranks.

References are independent of the pipeline code: the whole Hugging Face model's own forward, and the
unpipelined worker (pp = 1) on the same chat data, whose loss tests/unit/train/test_finetune_worker
checks against a plain cross-entropy."""

from __future__ import annotations

import contextlib

import pytest
import torch

from frenzy.train.model import build_base
from frenzy.train.pipeline import Stage, keep_stage
from frenzy.memory.states import stage_layer_range
from frenzy.train.reload import reload_and_evaluate
from tests.unit.train.dist_helpers import SMALL_LLAMA, base_config, run_world

TIED_QWEN = {"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 5,
             "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512, "max_position_embeddings": 256,
             "tie_word_embeddings": True, "use_sliding_window": True, "sliding_window": 4, "max_window_layers": 2}


@pytest.mark.parametrize("hf_config,stages", [(SMALL_LLAMA, 2), (TIED_QWEN, 2), (TIED_QWEN, 3)])
def test_stages_chained_are_the_whole_model_under_its_names(hf_config, stages):
    ids = torch.randint(0, 512, (2, 12), generator=torch.Generator().manual_seed(3))
    whole = build_base(hf_config, seed=0).eval()
    with torch.no_grad():
        expected = whole(input_ids=ids).logits
    names = set()
    x = ids
    for index in range(stages):
        model = build_base(hf_config, seed=0).eval()
        layers = stage_layer_range(hf_config["num_hidden_layers"], stages, index)
        keep_stage(model, Stage(index=index, count=stages, layers=layers), contextlib.nullcontext)
        names |= set(model.state_dict())
        with torch.no_grad():
            x = model(x)
    torch.testing.assert_close(x, expected, rtol=1e-5, atol=1e-5)
    assert names == set(whole.state_dict())  # every parameter under its whole-model name


def _config(folder, chat_file, **over):
    data = {"path": chat_file, "format": "chat", "validation": 0.2, "overlong": "truncate", "seed": 0}
    settings = dict(data=data, dataset=chat_file, steps=3, global_batch=4, seq_len=64, learning_rate=0.05,
                    optimizer="sgd", request={"seq_len": 64, "precision": "fp32"}, eval_every=1,
                    hf_config=dict(SMALL_LLAMA, num_hidden_layers=3, tie_word_embeddings=True))
    settings.update(over)
    return base_config(folder, **settings)


def _train(folder, chat_file, **over) -> list[dict]:
    folder.mkdir(exist_ok=True)
    cfg = _config(folder, chat_file, **over)
    results = run_world(cfg, cfg.get("dp", 1) * cfg.get("pp", 1), folder)
    for r in results:
        assert "error" not in r, r["traceback"]
    # every rank reports the busiest rank's measured peak
    assert len({tuple(x["peak_bytes"] for x in r["reports"]) for r in results}) == 1
    return results[0]["reports"]


@pytest.mark.slow
def test_pipelined_plans_train_as_the_unpipelined_one(tmp_path, chat_file):
    plain = _train(tmp_path / "pp1", chat_file, micro_batch=1, grad_accum=4)
    losses = [r["loss"] for r in plain]
    assert losses[0] > losses[1] > losses[2]
    for name, layout in {"pp2": dict(pp=2, micro_batch=1, grad_accum=4),
                         "pp2-dp2-fsdp": dict(pp=2, dp=2, zero=3, micro_batch=1, grad_accum=2)}.items():
        reports = _train(tmp_path / name, chat_file, **layout)
        assert [r["loss"] for r in reports] == pytest.approx(losses, rel=1e-5), name
        assert [r["eval_loss"] for r in reports] == pytest.approx([r["eval_loss"] for r in plain], rel=1e-5), name
        assert [r["grad_norm"] for r in reports] == pytest.approx([r["grad_norm"] for r in plain], rel=1e-4), name
        # the busiest stage holds about half the layers: less than the whole model, reported by every rank
        assert 0 < reports[-1]["peak_bytes"] < plain[-1]["peak_bytes"]


@pytest.mark.slow
def test_checkpoints_resume_across_pipeline_layouts(tmp_path, chat_file):
    whole = [r["loss"] for r in _train(tmp_path / "whole", chat_file, steps=4, micro_batch=1, grad_accum=4,
                                       optimizer="adamw", learning_rate=0.01)]
    for first, second in [(dict(pp=2), dict(pp=1)), (dict(pp=1), dict(pp=2, dp=2, zero=0, micro_batch=1)),
                          (dict(pp=2), dict(pp=2))]:
        folder = tmp_path / f"resume-{first['pp']}-{second['pp']}"
        base = dict(optimizer="adamw", learning_rate=0.01, micro_batch=1, grad_accum=4, checkpoint_every=2)
        _train(folder, chat_file, steps=2, **dict(base, **first))
        second = dict(base, **second)
        second["grad_accum"] = 4 // (second.get("dp", 1) * second["micro_batch"])
        reports = _train(folder, chat_file, steps=4, attempt=2, **second)
        assert [r["step"] for r in reports] == [3, 4]
        # the optimizer state came along: the resumed steps are the uninterrupted run's
        assert [r["loss"] for r in reports] == pytest.approx(whole[2:], rel=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["full", "lora"])
def test_the_export_of_stages_scores_as_the_job_reported(tmp_path, chat_file, method):
    reports = _train(tmp_path, chat_file, pp=2, micro_batch=1, grad_accum=4, method=method)
    reloaded = reload_and_evaluate(tmp_path / "artifacts")
    assert reloaded.kind == ("model" if method == "full" else "peft-adapter")
    assert reloaded.trainer_eval_loss == pytest.approx(reports[-1]["eval_loss"], abs=1e-5)
    assert reloaded.reloaded_eval_loss == pytest.approx(reloaded.trainer_eval_loss, abs=1e-5)

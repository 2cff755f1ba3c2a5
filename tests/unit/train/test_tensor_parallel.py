"""Tensor and sequence parallelism in the worker on local gloo ranks: a dense family (Llama), MoE
families (Qwen3-MoE, Mixtral: experts split by expert) and a family enabled by the shared rule table
(Starcoder2: LayerNorms with biases, a non-gated MLP, a tied head) train three steps with the loss
going down and the same losses as one rank on the same data (the reference: tp=1, computed here by
the same worker without any split); a tp2+sp checkpoint resumes on one rank where the
uninterrupted run would be; a LoRA adapter trained under tp2+sp reloads as a plain peft adapter and
scores the validation set as the job reported."""

from __future__ import annotations


import pytest

from frenzy.train.reload import reload_and_evaluate
from tests.unit.train.dist_helpers import SMALL_LLAMA, base_config, run_world

pytestmark = pytest.mark.slow

SMALL = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             vocab_size=512, max_position_embeddings=256)
QWEN3_MOE = dict(SMALL, model_type="qwen3_moe", num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                 head_dim=16, tie_word_embeddings=False)
MIXTRAL = dict(SMALL, model_type="mixtral", num_local_experts=4, num_experts_per_tok=2, tie_word_embeddings=False)
STARCODER2 = dict(SMALL, model_type="starcoder2", tie_word_embeddings=True, bos_token_id=None, eos_token_id=None)
FAMILIES = {"llama": SMALL_LLAMA, "qwen3_moe": QWEN3_MOE, "mixtral": MIXTRAL, "starcoder2": STARCODER2}
ALL = ["q", "k", "v", "o", "gate", "up", "down"]


def _config(tmp_path, chat_file, family: str, **over) -> dict:
    data = {"path": chat_file, "format": "chat", "validation": 0.2, "overlong": "truncate", "seed": 0}
    return base_config(tmp_path, family=family, hf_config=FAMILIES[family], data=data, dataset=chat_file,
                       seq_len=64, request={"seq_len": 64}, learning_rate=0.01, **over)


def _losses(tmp_path, cfg: dict) -> list[float]:
    results = run_world(cfg, cfg["dp"] * cfg["tp"], tmp_path)
    for r in results:
        assert "error" not in r, r.get("traceback", r["error"])
    return [x["loss"] for x in results[0]["reports"]]


_REFERENCE: dict[tuple, list[float]] = {}


def _reference(tmp_path_factory, chat_file, family: str, method: str) -> list[float]:
    """The same job on one rank (memoised per family and method: several layouts compare with it)."""
    key = (family, method)
    if key not in _REFERENCE:
        folder = tmp_path_factory.mktemp(f"ref-{family}-{method}")
        _REFERENCE[key] = _losses(folder, _config(folder, chat_file, family, method=method, lora_targets=ALL))
    return _REFERENCE[key]


@pytest.mark.parametrize(("family", "method", "sp"), [
    ("llama", "full", False), ("llama", "full", True), ("llama", "lora", False), ("llama", "lora", True),
    ("qwen3_moe", "full", True), ("qwen3_moe", "lora", False), ("mixtral", "full", False), ("starcoder2", "full", True),
    ("starcoder2", "lora", True),
])
def test_tp2_trains_as_one_rank_does(tmp_path, tmp_path_factory, chat_file, family, method, sp):
    reference = _reference(tmp_path_factory, chat_file, family, method)
    losses = _losses(tmp_path, _config(tmp_path, chat_file, family, tp=2, sequence_parallel=sp, method=method,
                                       lora_targets=ALL))
    assert len(losses) == 3 and losses[2] < losses[1] < losses[0]
    # fp32 sums in another order (partial sums all-reduced); routing to the top-k experts amplifies it
    assert losses == pytest.approx(reference, rel=2e-4 if family in ("qwen3_moe", "mixtral") else 2e-5)


def test_a_tp2_sp_checkpoint_resumes_on_one_rank(tmp_path, tmp_path_factory, chat_file):
    whole = _reference(tmp_path_factory, chat_file, "llama", "full")
    first = _losses(tmp_path, _config(tmp_path, chat_file, "llama", steps=2, tp=2, sequence_parallel=True))
    second = _losses(tmp_path, _config(tmp_path, chat_file, "llama", attempt=2, steps=3, tp=1))
    assert first + second == pytest.approx(whole, rel=2e-5)


def test_a_lora_adapter_trained_with_tp2_sp_reloads_as_a_peft_adapter(tmp_path, chat_file):
    cfg = _config(tmp_path, chat_file, "starcoder2", tp=2, sequence_parallel=True, method="lora", lora_targets=ALL,
                  eval_every=1)
    results = run_world(cfg, 2, tmp_path)
    assert "error" not in results[0], results[0].get("traceback")
    evals = [r["eval_loss"] for r in results[0]["reports"]]
    reloaded = reload_and_evaluate(tmp_path / "artifacts")
    assert reloaded.kind == "peft-adapter" and reloaded.trainer_eval_loss == pytest.approx(evals[-1], abs=1e-5)
    assert reloaded.reloaded_eval_loss == pytest.approx(reloaded.trainer_eval_loss, abs=1e-5)
    assert evals[-1] < evals[0]

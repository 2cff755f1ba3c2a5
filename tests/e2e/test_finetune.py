"""Fine-tunes end to end on real Ray through the HTTP API: a chat-format LoRA job hands back a peft
adapter that, downloaded and reloaded with PeftModel.from_pretrained, scores the job's validation
set exactly as the job reported (the other half, a full fine-tune re-planned after an OOM, is in
test_serverless)."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import ROOT
from tests.e2e.test_serverless import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
EXAMPLES = ROOT / "examples"


def download(client, job_id, folder):
    listing = client.artifacts(job_id)
    assert listing["ready"], listing
    for f in listing["files"]:
        client.download(job_id, f["path"], folder)
    return {f["path"] for f in listing["files"]}


def test_chat_lora_job_hands_back_an_adapter_that_scores_as_reported(client, tmp_path):
    from frenzy.train.reload import reload_and_evaluate

    created = client.submit({"model": str(EXAMPLES / "tiny-chat"), "dataset": str(EXAMPLES / "data" / "instructions.jsonl"),
                             "data_format": "chat", "validation": 0.1, "seq_len": 128, "global_batch": 8, "steps": 6,
                             "method": "lora", "lora_targets": ["all-linear"], "lora_rank": 8, "learning_rate": 0.003,
                             "lr_schedule": "cosine", "warmup_steps": 2, "eval_every": 3, "precision": "fp32"})
    job = wait_for(client, created["id"], {"succeeded", "failed"})
    assert job["state"] == "succeeded", job["failure_reason"]
    assert job["eval_loss"] is not None and job["progress"]["step"] == 6
    files = download(client, job["id"], tmp_path)
    assert {"adapter_config.json", "adapter_model.safetensors", "frenzy_job.json", "tokenizer.json"} <= files
    result = reload_and_evaluate(tmp_path)
    assert result.kind == "peft-adapter" and result.trainer_eval_loss == pytest.approx(job["eval_loss"], abs=1e-5)
    assert abs(result.reloaded_eval_loss - result.trainer_eval_loss) < 1e-3
    lines = [ln["line"] for ln in client.logs(job["id"])["lines"]]
    assert any("training and" in ln and "validation examples" in ln for ln in lines)
    assert any("eval_loss" in ln for ln in lines)

"""Fine-tuning jobs at submission: the data is read as the workers will read it, so bad rows are a
422 naming the row (nothing is queued), `epochs` becomes steps from the real example count, and
the data report goes into the job's log."""

from __future__ import annotations

import json
import math

import pytest


EXAMPLES = __import__("pathlib").Path(__file__).resolve().parents[3] / "examples"


def _chat_file(tmp_path, rows) -> str:
    path = tmp_path / "chat.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return str(path)


def _turns(i):
    return {"messages": [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]}


def test_epochs_become_steps_from_the_training_examples(client, tmp_path):
    data = _chat_file(tmp_path, [_turns(i) for i in range(50)])
    body = {"model": str(EXAMPLES / "tiny-chat"), "dataset": data, "validation": 0.2, "epochs": 3,
            "global_batch": 8, "seq_len": 64, "method": "lora"}
    r = client.post("/v1/jobs", json=body)
    assert r.status_code == 201, r.text
    job = client.get(f"/v1/jobs/{r.json()['id']}").json()
    assert job["request"]["train_examples"] == 40  # 50 rows, 10 held out
    log = [ln["line"] for ln in client.get(f"/v1/jobs/{job['id']}/logs").json()["lines"]]
    assert any("40 training and 10 validation examples" in ln for ln in log), log
    client.loop.step()
    worker = client.executor.launched[-1].worker_config
    assert worker["steps"] == math.ceil(3 * 40 / 8) and worker["data"]["validation"] == 0.2
    assert worker["local_weights"] == str(EXAMPLES / "tiny-chat")


@pytest.mark.parametrize("rows, words", [
    ([_turns(0), {"messages": [{"role": "wizard", "content": "hi"}]}], ["row 2", "wizard"]),
    ([_turns(0), {"prompt": "p"}], ["row 2"]),
    ([], ["empty"]),
])
def test_bad_rows_are_a_422_that_names_them(client, tmp_path, rows, words):
    data = _chat_file(tmp_path, rows)
    r = client.post("/v1/jobs", json={"model": "gpt2", "dataset": data, "data_format": "chat", "seq_len": 64})
    assert r.status_code == 422, r.text
    assert all(w in r.json()["detail"] for w in words), r.json()["detail"]
    assert client.get("/v1/jobs").json() == []


def test_every_row_dropped_is_refused(client, tmp_path):
    data = _chat_file(tmp_path, [{"messages": [{"role": "user", "content": "x" * 500},
                                               {"role": "assistant", "content": "y" * 500}]}] * 3)
    r = client.post("/v1/jobs", json={"model": "gpt2", "dataset": data, "overlong": "drop", "seq_len": 64})
    assert r.status_code == 422 and "seq_len" in r.json()["detail"], r.text


@pytest.mark.parametrize("body, words", [
    ({"model": "gpt2", "epochs": 2}, ["need a dataset"]),
    ({"model": "gpt2", "validation": 0.1}, ["need a dataset"]),
    ({"model": "gpt2", "method": "lora", "merge_lora": True}, ["merge_lora", "local folder"]),
    ({"model": "gpt2", "merge_lora": True}, ["LoRA"]),
    ({"model": "gpt2", "lr_schedule": "step"}, ["lr_schedule"]),
    ({"model": "gpt2", "steps": 5, "epochs": 1}, ["not steps and epochs"]),
    ({"model": "gpt2", "max_grad_norm": 0}, ["max_grad_norm"]),
    ({"model": "gpt2", "epochs": True}, ["epochs", "not true/false"]),
    ({"model": "gpt2", "validation": True}, ["validation", "not true/false"]),
])
def test_settings_that_cannot_run_say_what_to_change(client, body, words):
    r = client.post("/v1/jobs", json=body)
    assert r.status_code == 422, r.text
    assert all(w in r.json()["detail"] for w in words), r.json()["detail"]


def test_a_plain_text_corpus_is_accepted_and_read_as_text_documents(client, tmp_path):
    # Before: the API and docs accepted .txt, and the data check refused it.
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(f"document {i}: " + "words " * 40 for i in range(30)))
    r = client.post("/v1/jobs", json={"model": str(EXAMPLES / "tiny-chat"), "dataset": str(corpus), "epochs": 1,
                                      "global_batch": 4, "seq_len": 64, "method": "lora"})
    assert r.status_code == 201, r.text
    log = [ln["line"] for ln in client.get(f"/v1/jobs/{r.json()['id']}/logs").json()["lines"]]
    assert any("30 rows" in ln and "text" in ln for ln in log), log

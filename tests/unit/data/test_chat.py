"""Chat masks: the trained positions are exactly the assistant turns (content + end-of-turn marker),
under the default template with byte ids, the shipped ChatML tokenizer, a Llama-3-style template,
and a template that rewrites earlier turns."""

import json

import pytest

from frenzy.data import DataSpec, Overlong, prepare
from frenzy.data.tokenizer import HFTokenizer

from .conftest import INSTRUCTIONS, TINY_CHAT, chat, write_jsonl

END = "<|im_end|>"
LLAMA3 = ("{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
          "{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
          "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}")
# Like Qwen3's: only the final answer gets an (empty) reasoning block, so a conversation renders an
# earlier answer differently from how it renders when that answer is last.
THINK_LAST = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
              "{% if m['role'] == 'assistant' and loop.last %}<think>\n\n</think>\n\n{% endif %}"
              "{{ m['content'] }}<|im_end|>\n{% endfor %}"
              "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
# Rewrites earlier answers' text itself: nothing can be masked reliably.
SHOUT_EARLIER = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
                 "{% if m['role'] == 'assistant' and not loop.last %}{{ m['content'] | upper }}"
                 "{% else %}{{ m['content'] }}{% endif %}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")

CONVERSATION = chat(("system", "Be brief."), ("user", "What is 2 + 3?"), ("assistant", "2 + 3 = 5"),
                    ("user", "Reverse 'cat'."), ("assistant", "tac"))


def hf(template: str | None = None) -> HFTokenizer:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(TINY_CHAT), local_files_only=True)
    if template is not None:
        tok.chat_template = template
    return HFTokenizer(tok, source="tiny-chat")


def trained_pieces(tok, ids, labels) -> list[str]:
    """The decoded runs of consecutive trained positions."""
    pieces, run = [], []
    for i, label in zip(ids.tolist(), labels.tolist()):
        if label == -100:
            if run:
                pieces.append(tok.decode(run))
            run = []
        else:
            assert label == i
            run.append(i)
    return pieces + ([tok.decode(run)] if run else [])


def test_default_template_with_bytes_counts_by_hand(tmp_path, raw):
    path = write_jsonl(tmp_path / "c.jsonl", [CONVERSATION])
    data = prepare(DataSpec(path=path), raw, seq_len=256)
    text = ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n"
            "<|im_start|>assistant\n2 + 3 = 5<|im_end|>\n<|im_start|>user\nReverse 'cat'.<|im_end|>\n"
            "<|im_start|>assistant\ntac<|im_end|>\n")
    ids, labels = data.train.input_ids[0], data.train.labels[0]
    assert ids[:len(text)].tolist() == list(text.encode())
    first = text.index("2 + 3 = 5<")
    assert labels[:first].tolist() == [-100] * first and labels[first] == ord("2")
    assert data.report.trainable_tokens == len("2 + 3 = 5") + len(END) + len("tac") + len(END)  # 32
    assert trained_pieces(raw, ids, labels) == ["2 + 3 = 5" + END, "tac" + END]
    assert data.report.template == "default ChatML"


@pytest.mark.parametrize("template, end", [(None, END), (LLAMA3, "<|eot_id|>")], ids=["chatml", "llama3"])
def test_real_templates_train_on_answers_and_end_of_turn(tmp_path, template, end):
    tok = hf(template)
    path = write_jsonl(tmp_path / "c.jsonl", [CONVERSATION])
    data = prepare(DataSpec(path=path), tok, seq_len=256)  # Llama-3 markers are many ids here
    assert data.report.truncated == 0
    ids, labels = data.train.input_ids[0], data.train.labels[0]
    assert trained_pieces(tok, ids, labels) == ["2 + 3 = 5" + end, "tac" + end]
    rendered = tok.render_chat(CONVERSATION["messages"], add_generation_prompt=False)
    assert tok.decode([i for i in ids.tolist() if i != tok.pad_id]) == rendered
    assert data.report.template == "the tokenizer's chat template"


def test_template_that_changes_the_last_turn_still_masks_each_answer(tmp_path):
    tok = hf(THINK_LAST)
    data = prepare(DataSpec(path=write_jsonl(tmp_path / "c.jsonl", [CONVERSATION])), tok, seq_len=128)
    pieces = trained_pieces(tok, data.train.input_ids[0], data.train.labels[0])
    # the earlier answer is found by its own text; the final one trains on its empty reasoning block too
    assert pieces == ["2 + 3 = 5" + END, "<think>\n\n</think>\n\ntac" + END]


def test_template_that_rewrites_an_earlier_answer_is_refused_naming_the_row(tmp_path):
    two_turns = chat(("user", "a"), ("assistant", "ok"), ("user", "b"), ("assistant", "fine"))
    path = write_jsonl(tmp_path / "c.jsonl", [chat(("user", "a"), ("assistant", "ok")), two_turns])
    with pytest.raises(ValueError, match=r"c\.jsonl: row 2: .*assistant message 2 differently"):
        prepare(DataSpec(path=path), hf(SHOUT_EARLIER), seq_len=128)


def test_truncation_cuts_inside_an_answer(tmp_path, raw):
    prompt = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    path = write_jsonl(tmp_path / "c.jsonl", [chat(("user", "hi"), ("assistant", "hello there"))])
    data = prepare(DataSpec(path=path), raw, seq_len=len(prompt) + 5)
    assert trained_pieces(raw, data.train.input_ids[0], data.train.labels[0]) == ["hello"]
    assert data.report.truncated == 1
    with pytest.raises(ValueError, match="longer than seq_len .* overlong 'truncate'"):
        prepare(DataSpec(path=path, overlong=Overlong.DROP), raw, seq_len=len(prompt) + 5)
    with pytest.raises(ValueError, match="no training example is left from 1 rows"):
        prepare(DataSpec(path=path), raw, seq_len=len(prompt))


def test_shipped_instructions_prepare_with_the_shipped_tokenizer():
    config = json.loads((TINY_CHAT / "config.json").read_text())
    from frenzy.data import load_tokenizer

    tok = load_tokenizer(str(TINY_CHAT), config)
    data = prepare(DataSpec(path=str(INSTRUCTIONS), validation=0.1), tok, seq_len=64)
    rows = [json.loads(line) for line in INSTRUCTIONS.read_text().splitlines()]
    assert 300 <= len(rows) <= 400 and data.report.rows == len(rows)
    assert (data.report.truncated, data.report.dropped) == (0, 0)
    assert data.report.train_examples + data.report.validation_examples == len(rows)
    assert int(data.train.input_ids.max()) < config["vocab_size"]
    assert all(any(m["role"] == "system" for m in r["messages"]) for r in rows[5::12])

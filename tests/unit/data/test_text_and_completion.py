"""Text packing and prompt/completion masks, with ids equal to the bytes (see conftest.raw)."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from frenzy.data import DataSpec, InvalidDataError, Overlong, prepare

from .conftest import EOS, write_jsonl

I = -100


def b(text: str) -> list[int]:
    return list(text.encode())


def test_text_is_packed_with_eos_and_the_partial_window_dropped(tmp_path, raw):
    path = write_jsonl(tmp_path / "t.jsonl", [{"text": "abc"}, {"text": "de"}, {"text": ""}])
    data = prepare(DataSpec(path=path), raw, seq_len=3)
    # stream a b c EOS d e EOS -> two full windows, the single EOS left over is dropped
    assert data.train.input_ids.tolist() == [b("abc"), [EOS] + b("de")]
    assert data.train.labels.tolist() == data.train.input_ids.tolist()
    assert data.train.input_ids.dtype == np.int64 and len(data.validation) == 0
    report = data.report
    assert (report.format, report.rows, report.dropped, report.trainable_tokens) == ("text", 3, 1, 6)


def test_a_single_short_window_is_padded_without_loss(tmp_path, raw):
    path = write_jsonl(tmp_path / "t.jsonl", [{"text": "ab"}])
    data = prepare(DataSpec(path=path), raw, seq_len=6)
    assert data.train.input_ids.tolist() == [b("ab") + [EOS, EOS, EOS, EOS]]  # pad = eos here
    assert data.train.labels.tolist() == [b("ab") + [EOS, I, I, I]]


def test_prompt_completion_trains_on_completion_and_eos(tmp_path, raw):
    path = write_jsonl(tmp_path / "pc.jsonl", [{"prompt": "2+2=", "completion": "4"},
                                               {"prompt": "Q:", "completion": "yes"}])
    data = prepare(DataSpec(path=path), raw, seq_len=8)
    assert data.train.input_ids.tolist() == [b("2+2=4") + [EOS] * 3, b("Q:yes") + [EOS] * 3]
    assert data.train.labels.tolist() == [[I] * 4 + b("4") + [EOS, I, I], [I] * 2 + b("yes") + [EOS, I, I]]
    assert data.report.trainable_tokens == (1 + 1) + (3 + 1)


def test_bos_comes_first_when_the_tokenizer_adds_one(tmp_path, raw):
    raw.bos_id, raw.adds_bos = 258, True  # an instance attribute: the class keeps bos None
    path = write_jsonl(tmp_path / "pc.jsonl", [{"prompt": "a", "completion": "b"}])
    data = prepare(DataSpec(path=path), raw, seq_len=4)
    assert data.train.input_ids.tolist() == [[258] + b("ab") + [EOS]]
    assert data.train.labels.tolist() == [[I, I] + b("b") + [EOS]]


def _overlong_rows(tmp_path):
    return write_jsonl(tmp_path / "o.jsonl", [
        {"prompt": "ab", "completion": "c"},            # 4 tokens: fits
        {"prompt": "abcdef", "completion": "ghij"},     # 11: truncated to 8, g and h still trained
        {"prompt": "abcdefghij", "completion": "k"},    # 12: the first 8 are all prompt
    ])


def test_truncate_keeps_the_head_and_drops_rows_left_with_nothing_to_learn(tmp_path, raw):
    data = prepare(DataSpec(path=_overlong_rows(tmp_path)), raw, seq_len=8)
    assert (data.report.truncated, data.report.dropped, len(data.train)) == (1, 1, 2)
    assert data.train.input_ids[1].tolist() == b("abcdefgh")
    assert data.train.labels[1].tolist() == [I] * 6 + b("gh")
    assert data.report.trainable_tokens == 2 + 2


def test_drop_removes_every_overlong_row(tmp_path, raw):
    data = prepare(DataSpec(path=_overlong_rows(tmp_path), overlong=Overlong.DROP), raw, seq_len=8)
    assert (data.report.truncated, data.report.dropped, len(data.train)) == (0, 2, 1)
    assert data.train.input_ids.tolist() == [b("abc") + [EOS] * 5]


def test_parquet_csv_and_json_array_give_the_jsonl_arrays(tmp_path, raw):
    rows = [{"prompt": "x,y", "completion": "z"}, {"prompt": "é", "completion": "\"q\""}]
    expected = prepare(DataSpec(path=write_jsonl(tmp_path / "a.jsonl", rows)), raw, 12).train
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "a.parquet")
    (tmp_path / "a.csv").write_text('prompt,completion\n"x,y",z\né,"""q"""\n')
    (tmp_path / "a.json").write_text(__import__("json").dumps(rows))
    for name in ("a.parquet", "a.csv", "a.json"):
        got = prepare(DataSpec(path=str(tmp_path / name)), raw, 12).train
        assert got.input_ids.tobytes() == expected.input_ids.tobytes(), name
        assert got.labels.tobytes() == expected.labels.tobytes(), name


def test_a_txt_file_is_one_text_document_per_paragraph(tmp_path, raw):
    documents = ["first line\nsecond line", "é, \"quoted\"", "third"]
    expected = prepare(DataSpec(path=write_jsonl(tmp_path / "a.jsonl", [{"text": d} for d in documents])), raw, 8)
    # blank lines (also with spaces, several, or Windows line ends) separate documents; lines within one do not
    (tmp_path / "a.txt").write_bytes("\n\nfirst line\r\nsecond line\r\n \r\n\n\né, \"quoted\"\n\t\nthird\n".encode())
    got = prepare(DataSpec(path=str(tmp_path / "a.txt")), raw, 8)
    assert got.report.format == "text" and got.report.rows == 3
    assert got.train.input_ids.tobytes() == expected.train.input_ids.tobytes()
    (tmp_path / "blank.txt").write_text("\n \n\n")
    with pytest.raises(InvalidDataError, match="blank.txt holds no records"):
        prepare(DataSpec(path=str(tmp_path / "blank.txt")), raw, 8)


def test_text_documents_start_with_bos_when_the_tokenizer_adds_one(tmp_path, raw):
    raw.bos_id, raw.adds_bos = 258, True
    path = write_jsonl(tmp_path / "t.jsonl", [{"text": "ab"}, {"text": "c"}])
    data = prepare(DataSpec(path=path), raw, seq_len=7)
    assert data.train.input_ids.tolist() == [[258] + b("ab") + [EOS, 258] + b("c") + [EOS]]

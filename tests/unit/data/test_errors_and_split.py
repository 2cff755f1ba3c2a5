"""Every refusal names the file and the row, the validation split holds out the right rows, and
preparing twice gives byte-identical arrays."""

import json

import pytest

from frenzy.data import DataFormat, DataSpec, InvalidDataError, prepare

from .conftest import chat, write_jsonl

GOOD = chat(("user", "q"), ("assistant", "a"))


@pytest.mark.parametrize("bad, words", [
    ({"messages": []}, "non-empty list"),
    ({"messages": "hi"}, "non-empty list"),
    (chat(("user", "q"), ("robot", "a")), "message 2 has role 'robot'"),
    (chat(("user", "q"), ("tool", "42"), ("assistant", "a")), "tool turns are not supported"),
    ({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": None}]},
     "message 2 (assistant) has NoneType content"),
    (chat(("system", "s"), ("user", "q")), "no assistant message"),
    ({"messages": [{"role": "user", "content": "q"}, "a"]}, "message 2 is str"),
])
def test_bad_chat_rows_are_named(tmp_path, raw, bad, words):
    path = write_jsonl(tmp_path / "c.jsonl", [GOOD, GOOD, bad, GOOD])
    with pytest.raises(InvalidDataError) as info:
        prepare(DataSpec(path=path), raw, 64)
    assert "c.jsonl: row 3: " in str(info.value) and words in str(info.value)


def test_a_column_whose_type_changes_still_names_the_row(tmp_path, raw):
    # Arrow cannot hold string and number content in one column; the plain reader names the row.
    rows = [GOOD, {"messages": [{"role": "user", "content": 7}, {"role": "assistant", "content": "a"}]}]
    with pytest.raises(InvalidDataError, match=r"row 2: message 1 \(user\) has int content"):
        prepare(DataSpec(path=write_jsonl(tmp_path / "c.jsonl", rows)), raw, 64)


@pytest.mark.parametrize("rows, fmt, words", [
    ([{"prompt": "p", "completion": 3}], DataFormat.AUTO, "row 1: 'completion' must be a string, not int"),
    ([{"text": "x"}, {"text": ["x"]}], DataFormat.AUTO, "row 2: 'text' must be a string, not list"),
    ([{"question": "q", "answer": "a"}], DataFormat.AUTO,
     "columns found ['answer', 'question']; expected messages for chat; prompt + completion for "
     "prompt-completion; text for text"),
    ([{"text": "x"}], DataFormat.CHAT, "columns found ['text']; expected messages for chat."),
])
def test_bad_fields_and_missing_columns(tmp_path, raw, rows, fmt, words):
    with pytest.raises(InvalidDataError) as info:
        prepare(DataSpec(path=write_jsonl(tmp_path / "d.jsonl", rows), format=fmt), raw, 64)
    assert words in str(info.value) and "d.jsonl" in str(info.value)


def test_a_file_of_many_columns_is_answered_with_a_few_of_them(tmp_path, raw):
    # Before: every column name was repeated, twice, in the server's answer (85 MB for 2 M columns).
    row = {f"column_{i:06d}_" + "x" * 100: 0 for i in range(20_000)}
    with pytest.raises(InvalidDataError) as info:
        prepare(DataSpec(path=write_jsonl(tmp_path / "wide.jsonl", [row])), raw, 64)
    text = str(info.value)
    assert "and 19,980 more" in text and "'column_000000_" in text and "column_000020_" not in text
    assert len(text) < 2_000 + len(str(tmp_path)), len(text)


def test_unreadable_files_say_what_to_do(tmp_path, raw):
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "blank.jsonl").write_text("\n\n")
    (tmp_path / "broken.jsonl").write_text('{"text": "a"}\n{"text": \n')
    (tmp_path / "folder.jsonl").mkdir()
    cases = {"empty.jsonl": "is empty", "blank.jsonl": "no records", "broken.jsonl": "line 2 is not valid JSON",
             "folder.jsonl": "is a folder", "missing.jsonl": "does not exist"}
    for name, words in cases.items():
        with pytest.raises(InvalidDataError, match=words):
            prepare(DataSpec(path=str(tmp_path / name)), raw, 64)


def test_every_row_empty_is_an_error(tmp_path, raw):
    path = write_jsonl(tmp_path / "t.jsonl", [{"text": ""}, {"text": ""}])
    with pytest.raises(InvalidDataError, match="no training example is left from 2 rows \\(2 dropped\\)"):
        prepare(DataSpec(path=path), raw, 8)


def _numbered(tmp_path, n=20):
    return write_jsonl(tmp_path / "n.jsonl", [{"prompt": "p", "completion": f"{i:02d}"} for i in range(n)])


def _completions(examples) -> set[str]:
    return {bytes(row[1:3]).decode() for row in examples.input_ids.tolist()}


def test_a_fraction_holds_out_rounded_rows_chosen_by_the_seed(tmp_path, raw):
    path = _numbered(tmp_path)
    data = prepare(DataSpec(path=path, validation=0.25, seed=3), raw, 8)
    train, val = _completions(data.train), _completions(data.validation)
    assert len(val) == 5 and len(train) == 15 and train | val == {f"{i:02d}" for i in range(20)}
    assert (data.report.rows, data.report.validation_rows, data.report.validation_examples) == (20, 5, 5)
    assert data.report.trainable_tokens == 15 * 3  # two digits + EOS per training row
    others = [_completions(prepare(DataSpec(path=path, validation=0.25, seed=s), raw, 8).validation)
              for s in (4, 5)]
    assert val not in others  # the seed picks the rows


def test_a_fraction_that_leaves_no_validation_row_is_refused(tmp_path, raw):
    with pytest.raises(InvalidDataError, match="leaves 0 validation and 3 training rows"):
        prepare(DataSpec(path=_numbered(tmp_path, 3), validation=0.1), raw, 8)


def test_a_separate_validation_file_is_prepared_the_same_way(tmp_path, raw):
    val = write_jsonl(tmp_path / "v.jsonl", [{"prompt": "p", "completion": "vv"}, {"prompt": "p", "completion": 1}])
    with pytest.raises(InvalidDataError, match=r"v\.jsonl: row 2: 'completion'"):
        prepare(DataSpec(path=_numbered(tmp_path), validation=val), raw, 8)
    write_jsonl(tmp_path / "v.jsonl", [{"prompt": "p", "completion": "vv"}])
    data = prepare(DataSpec(path=_numbered(tmp_path), validation=val), raw, 8)
    assert _completions(data.validation) == {"vv"} and len(data.train) == 20
    write_jsonl(tmp_path / "v.jsonl", [{"text": "x"}])
    with pytest.raises(InvalidDataError, match=r"v\.jsonl: columns found \['text'\]"):
        prepare(DataSpec(path=_numbered(tmp_path), validation=val), raw, 8)


def test_preparing_twice_gives_identical_bytes(tmp_path, raw):
    rows = [chat(("user", f"q{i}"), ("assistant", "a" * i)) for i in range(30)]
    spec = DataSpec(path=write_jsonl(tmp_path / "c.jsonl", rows), validation=0.2, seed=11)
    one, two = prepare(spec, raw, 80), prepare(DataSpec.from_json(json.loads(json.dumps(spec.to_json()))), raw, 80)
    for a, b in ((one.train, two.train), (one.validation, two.validation)):
        assert a.input_ids.tobytes() == b.input_ids.tobytes() and a.labels.tobytes() == b.labels.tobytes()
    assert one.report == two.report and one.report.to_json()["validation_examples"] == 6
    assert one.report.truncated > 0  # the truncation path is deterministic too


def test_report_lines_for_the_job_log(tmp_path, raw):
    data = prepare(DataSpec(path=_numbered(tmp_path)), raw, 8)
    text = "\n".join(data.report.lines())
    assert "prompt-completion, 20 rows" in text and "20 training and 0 validation examples, 60 trainable" in text


def test_importing_the_package_loads_no_heavy_module():
    import subprocess
    import sys

    code = ("import sys, frenzy.data\n"
            "print(','.join(m for m in ('torch', 'transformers', 'datasets', 'pyarrow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""

import pytest

from frenzy.data import DataFormat, DataSpec, InvalidDataError, Overlong


def test_round_trip_keeps_every_field():
    spec = DataSpec(path="d.jsonl", format=DataFormat.CHAT, validation=0.1, overlong=Overlong.DROP, seed=7)
    assert DataSpec.from_json(spec.to_json()) == spec
    assert spec.to_json() == {"path": "d.jsonl", "format": "chat", "validation": 0.1, "overlong": "drop", "seed": 7}
    assert DataSpec.from_json({"path": "a.csv", "validation": "v.parquet"}).validation_path == "v.parquet"


def test_strings_become_enums():
    spec = DataSpec(path="d.jsonl", format="prompt-completion", overlong="drop")
    assert spec.format is DataFormat.PROMPT_COMPLETION and spec.overlong is Overlong.DROP


@pytest.mark.parametrize("kwargs, words", [
    ({"path": "d.docx"}, ".jsonl"),
    ({"path": "d.jsonl", "format": "sharegpt"}, "auto, text, prompt-completion, chat"),
    ({"path": "d.jsonl", "overlong": "wrap"}, "truncate, drop"),
    ({"path": "d.jsonl", "validation": 0.6}, "(0, 0.5]"),
    ({"path": "d.jsonl", "validation": 0}, "(0, 0.5]"),
    ({"path": "d.jsonl", "validation": True}, "fraction"),
    ({"path": "d.jsonl", "validation": "v.xlsx"}, "validation file"),
    ({"path": "d.jsonl", "seed": 1.5}, "integer"),
])
def test_bad_specs_say_what_to_change(kwargs, words):
    with pytest.raises(InvalidDataError, match=r".*") as info:
        DataSpec(**kwargs)
    assert words in str(info.value) and isinstance(info.value, ValueError)


def test_unknown_json_field_is_refused():
    with pytest.raises(ValueError, match="unknown data spec fields"):
        DataSpec.from_json({"path": "d.jsonl", "shuffle": True})

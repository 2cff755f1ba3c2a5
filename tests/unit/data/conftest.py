"""Shared helpers: a byte tokenizer whose ids are the raw bytes (so expectations are computed by
hand from the text), and writers for small data files in tmp_path."""

import json
from pathlib import Path

import pytest

from frenzy.data import ByteTokenizer

REPO = Path(__file__).resolve().parents[3]
TINY_CHAT = REPO / "examples" / "tiny-chat"
INSTRUCTIONS = REPO / "examples" / "data" / "instructions.jsonl"
EOS = 259  # ByteTokenizer(260) without a config eos: eos = pad = vocab_size - 1, bytes map to 0..255


@pytest.fixture
def raw():
    return ByteTokenizer(260)


def write_jsonl(path: Path, rows: list) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def chat(*pairs: tuple[str, str]) -> dict:
    return {"messages": [{"role": role, "content": content} for role, content in pairs]}

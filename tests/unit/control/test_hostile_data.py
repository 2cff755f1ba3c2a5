"""Data files under a data root that are bombs or pathological, submitted to a real server process
whose data checks may use 256 MiB: each is a 422 naming what to change, the server's own peak memory
stays far below what the rows would take, and it serves on. Before, the reads ran in the server:
the nested JSON line killed it (a stack overflow in Arrow's JSON parser), the deep JSON array
answered 500 (RecursionError), and the parquet file grew it by the 400 MiB of its rows."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from frenzy.core.units import MiB
from tests.unit.control.test_hostile_server import _peak_rss_bytes, server_process

SERVE = """
import sys, uvicorn
from pathlib import Path
from frenzy.control.data_process import CheckLimits
from frenzy.control.inputs import InputPolicy
from tests.unit.control.conftest import build_client
root = Path(sys.argv[1])
policy = InputPolicy(roots=(root,), check_limits=CheckLimits(memory_bytes=256 << 20, seconds=60))
uvicorn.run(build_client(root, inputs=policy).app, host="127.0.0.1", port=int(sys.argv[2]), log_level="error")
"""
EXPANDED_BYTES = 20 * 20 * MiB  # the parquet bomb's rows: 20 of one 20 MiB string
DEPTH = 200_000
CHAT_OK = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}


def _bomb(path: Path) -> None:
    """20 rows sharing one dictionary entry of 20 MiB: a few KB on disk, 400 MiB as rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    value = pa.array(["a" * (20 * MiB)] * 20).dictionary_encode()
    pq.write_table(pa.table({"text": value}), path, compression="zstd", use_dictionary=True)


def _lines(path: Path, *rows) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _files(root: Path) -> dict[str, tuple[str, list[str]]]:
    """name -> (file, words its 422 must hold)."""
    _bomb(root / "bomb.parquet")
    (root / "deep.jsonl").write_text('{"text": ' + "[" * DEPTH + "]" * DEPTH + "}\n")
    (root / "deep.json").write_text("[" * DEPTH + "]" * DEPTH)
    (root / "latin1.jsonl").write_bytes(b'{"text": "ok"}\n{"text": "caf\xe9"}\n')
    (root / "utf16.jsonl").write_bytes('{"text": "hello"}\n'.encode("utf-16"))
    (root / "nul.jsonl").write_bytes(b'{"text": "a"}\n\x00\x00\n')
    _lines(root / "chat_str.jsonl", CHAT_OK, {"messages": "hi"})
    _lines(root / "chat_role.jsonl", CHAT_OK, {"messages": [{"role": "wizard", "content": "x"}]})
    _lines(root / "chat_content.jsonl", CHAT_OK, {"messages": [{"role": "user", "content": "q"},
                                                                {"role": "assistant", "content": {"a": [1]}}]})
    return {"bomb": ("bomb.parquet", ["more than the 0.25 GiB of memory", "--max-check-memory-bytes"]),
            "deep line": ("deep.jsonl", ["line 1 nests", "flatten it"]),
            "deep array": ("deep.json", ["nests", "flatten it"]),
            "latin-1": ("latin1.jsonl", ["not UTF-8", "byte 28", "save it as UTF-8"]),
            "utf-16": ("utf16.jsonl", ["not UTF-8", "byte 0"]),
            "NUL": ("nul.jsonl", ["line 2 is not valid JSON"]),
            "messages a string": ("chat_str.jsonl", ["row 2", "non-empty list"]),
            "unknown role": ("chat_role.jsonl", ["row 2", "role 'wizard'", "system, user, assistant"]),
            "content an object": ("chat_content.jsonl", ["row 2", "message 2 (assistant) has dict content"])}


@pytest.fixture
def server(tmp_path):
    with server_process(SERVE, tmp_path, timeout_s=120) as client:
        yield client


def test_bombs_and_malformed_data_are_422s_and_the_server_never_holds_the_rows(server, tmp_path):
    files = _files(tmp_path)
    _lines(tmp_path / "good.jsonl", CHAT_OK, CHAT_OK)
    body = {"model": "gpt2", "steps": 2, "seq_len": 64}
    good = server.post("/v1/jobs", json={**body, "dataset": str(tmp_path / "good.jsonl")})
    assert good.status_code == 201, good.text  # also starts the checker: what follows times the checks
    for name, (file, words) in files.items():
        started = time.monotonic()
        r = server.post("/v1/jobs", json={**body, "dataset": str(tmp_path / file)})
        elapsed = time.monotonic() - started
        assert r.status_code == 422, (name, r.status_code, r.text[:500])
        detail = r.json()["detail"]
        assert all(w in detail for w in words), (name, detail)
        assert elapsed < 30, (name, f"{elapsed:.1f} s")
        assert server.proc.poll() is None, name
    assert server.get("/healthz").status_code == 200
    assert [j["id"] for j in server.get("/v1/jobs").json()] == [good.json()["id"]]
    # The server's whole peak, imports included, is under the parquet file's rows alone.
    assert _peak_rss_bytes(server.pid) < EXPANDED_BYTES, _peak_rss_bytes(server.pid) / MiB

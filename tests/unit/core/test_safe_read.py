"""Reads of files a job names never block and never read more than their cap: a FIFO, /dev/zero or
an oversized file is refused before a byte is read (also on the CLI's local path)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from frenzy.core.errors import InvalidConfigError
from frenzy.core.hf_config import load_config
from frenzy.core.safe_read import read_regular
from frenzy.data.errors import InvalidDataError
from frenzy.data.files import read_rows

TINY = Path(__file__).resolve().parents[3] / "examples" / "tiny-llama" / "config.json"


def _fast(call, *args, **kwargs):
    # CPU seconds of this process, not wall time, which other processes' load stretches; a read that
    # blocks (a FIFO) still shows in the wall-time bound
    started, cpu = time.perf_counter(), time.process_time()
    try:
        return call(*args, **kwargs)
    finally:
        assert time.process_time() - cpu < 1.0 and time.perf_counter() - started < 10.0


@pytest.mark.parametrize("make, words", [
    (lambda p: os.mkfifo(p), "pipe"),
    (lambda p: os.symlink("/dev/zero", p), "device"),
    (lambda p: os.mkdir(p), "folder"),
])
def test_what_is_not_a_regular_file_is_refused_unread(tmp_path, make, words):
    path = tmp_path / "x.json"
    make(path)
    with pytest.raises(InvalidConfigError, match=words):
        _fast(read_regular, path, max_bytes=1 << 20)


def test_the_cap_is_the_files_size_and_what_is_read(tmp_path):
    path = tmp_path / "f.json"
    path.write_bytes(b"x" * 101)
    with pytest.raises(InvalidConfigError, match="101 bytes, over the 100"):
        read_regular(path, max_bytes=100)
    assert read_regular(path, max_bytes=101) == b"x" * 101
    with pytest.raises(InvalidConfigError, match="does not exist"):
        read_regular(tmp_path / "missing.json", max_bytes=100)


def test_load_config_of_a_fifo_or_dev_zero_fails_fast(tmp_path):
    os.mkfifo(tmp_path / "config.json")
    with pytest.raises(InvalidConfigError, match="pipe"):
        _fast(load_config, str(tmp_path))
    with pytest.raises(InvalidConfigError, match="device"):
        _fast(load_config, "/dev/zero")
    big = tmp_path / "big.json"
    big.write_text(json.dumps({**json.loads(TINY.read_text()), "pad": "x" * (1 << 20)}))
    with pytest.raises(InvalidConfigError, match="over the 1,048,576"):
        _fast(load_config, str(big))
    assert load_config(str(TINY))[0]["model_type"] == "llama"  # a real config still loads


def test_data_reads_refuse_fifos_devices_and_files_over_their_cap(tmp_path):
    os.mkfifo(tmp_path / "fifo.jsonl")
    os.symlink("/dev/zero", tmp_path / "zero.jsonl")
    for name, words in (("fifo.jsonl", "pipe"), ("zero.jsonl", "device")):
        with pytest.raises(InvalidDataError, match=words):
            _fast(read_rows, str(tmp_path / name))
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "hello"}\n' * 10)
    with pytest.raises(InvalidDataError, match="over the 100-byte limit"):
        read_rows(str(data), max_bytes=100)
    assert len(read_rows(str(data))) == 10

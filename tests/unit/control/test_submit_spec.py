"""`frenzy submit` with a spec file it cannot use: one line saying what to change, exit 2, never a
traceback (and nothing is sent: the URL below has no server)."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from frenzy.cli.main import app

NO_SERVER = "http://127.0.0.1:9"


@pytest.mark.parametrize("content, words", [
    ("", "is empty"),
    ("# only a comment\n", "is empty"),
    ("- model: gpt2\n- steps: 3\n", "is a list"),
    ("gpt2\n", "is a single string"),
    ("42\n", "is a single value"),
    ("model: [gpt2,\n", "is not valid YAML"),
    ("model: gpt2\n  steps: 3\n", "is not valid YAML"),
    (b"\xff\xfe\x00m", "is not UTF-8"),
])
def test_a_spec_that_is_not_a_mapping_is_one_line(tmp_path, content, words):
    spec = tmp_path / "job.yaml"
    spec.write_bytes(content if isinstance(content, bytes) else content.encode())
    _one_line_error(spec, words)


def test_a_folder_or_missing_file_is_one_line(tmp_path):
    _one_line_error(tmp_path, "is a folder")
    _one_line_error(tmp_path / "missing.yaml", "does not exist")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_an_unreadable_spec_is_one_line(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("model: gpt2\n")
    spec.chmod(0)
    _one_line_error(spec, "cannot be read")


def _one_line_error(spec, words):
    result = CliRunner().invoke(app, ["submit", str(spec), "--url", NO_SERVER])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and words in lines[0], result.output
    assert "Traceback" not in result.output

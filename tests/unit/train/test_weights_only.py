"""A model folder under a data root is read by the workers: a pickled `pytorch_model.bin` in it is
loaded weights-only, so a file that would run code when unpickled is refused and its code never runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from frenzy.train.model import build_base

TINY = Path(__file__).resolve().parents[3] / "examples" / "tiny-llama" / "config.json"


class _RunsCode:
    """Unpickled by plain pickle, this creates `path`: what a hostile weights file would do."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


def test_a_pickled_weights_file_never_runs_code(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    shutil.copy(TINY, folder / "config.json")
    marker = tmp_path / "code-ran"
    torch.save({"model.embed_tokens.weight": _RunsCode(marker)}, folder / "pytorch_model.bin")
    with pytest.raises(Exception) as refused:
        build_base(json.loads(TINY.read_text()), seed=0, weights_folder=str(folder))
    assert not marker.exists(), "unpickling the weights ran code"
    assert "weights_only" in str(refused.value) or "Unsupported global" in str(refused.value), refused.value

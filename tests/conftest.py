"""Shared test fixtures: the project's shared data folder beside the checkout."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
DATA = ROOT / "tests" / "data"


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"shared data folder {SHARED} is missing (it sits beside the checkout in CI)")
    return SHARED

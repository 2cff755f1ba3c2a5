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


@pytest.fixture(autouse=True, scope="session")
def _profile_cache(tmp_path_factory):
    """Profiled families cache their structure and profiles on disk: one fresh folder per test run."""
    import os

    previous = os.environ.get("FRENZY_CACHE_DIR")
    os.environ["FRENZY_CACHE_DIR"] = str(tmp_path_factory.mktemp("frenzy-cache"))
    yield
    if previous is None:
        os.environ.pop("FRENZY_CACHE_DIR", None)
    else:
        os.environ["FRENZY_CACHE_DIR"] = previous

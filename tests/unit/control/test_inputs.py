"""InputPolicy: the data roots from flags and the environment, and what a request is allowed to name."""

from __future__ import annotations

import os

import pytest

from frenzy.control.inputs import DEFAULT_MAX_DATA_BYTES, ROOTS_ENV, InputPolicy, InputRefusedError
from frenzy.control.request import JobRequest
from frenzy.core.errors import InvalidConfigError
from tests.unit.control.conftest import EXAMPLES


def test_roots_come_from_flags_and_the_environment_resolved(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    os.symlink(tmp_path / "b", tmp_path / "link-b")
    env = {ROOTS_ENV: os.pathsep.join([str(tmp_path / "link-b"), "", str(tmp_path / "a")])}
    policy = InputPolicy.from_settings([tmp_path / "a"], env=env)
    assert policy.roots == ((tmp_path / "a").resolve(), (tmp_path / "b").resolve())  # deduplicated, in order
    assert policy.max_data_bytes == DEFAULT_MAX_DATA_BYTES == 1 << 30
    assert InputPolicy.from_settings(env={}).roots == ()


def test_a_root_that_is_not_a_folder_is_an_error_naming_it(tmp_path):
    with pytest.raises(InvalidConfigError, match="data root .*missing is not an existing folder"):
        InputPolicy(roots=(tmp_path / "missing",))
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvalidConfigError, match="not an existing folder"):
        InputPolicy(roots=(tmp_path / "file",))
    with pytest.raises(InvalidConfigError, match="max_data_bytes"):
        InputPolicy(max_data_bytes=0)


def test_names_pass_paths_resolve_inside_and_are_refused_outside(tmp_path):
    policy = InputPolicy(roots=(EXAMPLES,))
    assert policy.check(JobRequest(model="gpt2")).model == "gpt2"
    assert policy.check(JobRequest(model="meta-llama/Llama-3.1-8B")).model == "meta-llama/Llama-3.1-8B"
    folder = policy.check(JobRequest(model=str(EXAMPLES / "tiny-chat" / ".")))
    assert folder.model == str((EXAMPLES / "tiny-chat").resolve())
    for outside in ("/etc/passwd", "/etc", str(EXAMPLES / ".." / "pyproject.toml"), "~/x.json", "./x",
                    "a/b/c", "x.json"):
        with pytest.raises(InputRefusedError, match="not a catalog model"):
            policy.check(JobRequest(model=outside))
    with pytest.raises(InputRefusedError, match="not an existing local"):
        policy.check(JobRequest(model="gpt2", dataset=str(tmp_path / "d.jsonl")))

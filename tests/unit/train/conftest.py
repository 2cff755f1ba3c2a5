"""Shared fixtures of the training-worker tests."""

import json

import pytest


@pytest.fixture(scope="module")
def chat_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "chat.jsonl"
    rows = [{"messages": [{"role": "user", "content": "q" * (1 + i % 5)},
                          {"role": "assistant", "content": "a" * (1 + (i * 7) % 13)}]} for i in range(40)]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return str(path)


@pytest.fixture
def fake_world():
    """A two-rank fake process group (collectives are no-ops) so fully_shard runs in this process."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    try:
        yield
    finally:
        dist.destroy_process_group()

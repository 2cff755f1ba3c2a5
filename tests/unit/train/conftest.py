"""Shared fixtures of the training-worker tests."""

import pytest

from .dist_helpers import write_short_chats


@pytest.fixture(scope="module")
def chat_file(tmp_path_factory):
    return write_short_chats(tmp_path_factory.mktemp("data"))


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

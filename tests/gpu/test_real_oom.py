"""On a real GPU: a card emulated smaller with set_per_process_memory_fraction raises a genuine
CUDA OOM that the executor classifies as 'oom' (the same path the fake-GPU hook takes on CPU)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def test_emulated_small_card_ooms_and_is_classified(tmp_path):
    from frenzy.executor.failures import classify
    from frenzy.train.config import WorkerConfig
    from frenzy.train.memory import limit_cuda_memory

    total = torch.cuda.get_device_properties(0).total_memory
    cfg = WorkerConfig(job_id="j", attempt=1, model_name="m", family="llama", hf_config={}, global_batch=1,
                       gpu_memory_bytes=256 * 2**20, fake_gpu=False)
    limit_cuda_memory(cfg)
    try:
        with pytest.raises(torch.OutOfMemoryError) as err:
            torch.empty(512 * 2**20, dtype=torch.uint8, device="cuda")
        assert classify(err.value)[0] == "oom"
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    assert total > 256 * 2**20

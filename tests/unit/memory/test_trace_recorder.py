"""The allocation recorder and the CUDA-semantics mode on single ops (fake CPU tensors).

Expected numbers come from tensor shapes and the documented CUDA behaviour, not from the code."""

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from torch.nn.attention import SDPBackend  # noqa: E402

from frenzy.memory.result import Phase  # noqa: E402
from frenzy.memory.trace.cuda_semantics import CudaSemantics, cuda_sdpa_backend  # noqa: E402
from frenzy.memory.trace.patches import gpu_decisions  # noqa: E402
from frenzy.memory.trace.recorder import GRADIENTS, WEIGHTS, AllocationRecorder  # noqa: E402
from frenzy.memory.trace.replay import replay  # noqa: E402


def _live_bytes(log):
    live = {}
    for event in log.events:
        if event > 0:
            live[event] = log.sizes[event - 1]
        else:
            live.pop(-event)
    return sum(live.values())


def test_views_and_inplace_ops_are_not_new_allocations():
    with FakeTensorMode():
        recorder = AllocationRecorder(vocab_size=10_000)
        with recorder:
            x = torch.empty(1000)  # 4000 B -> 4096 B
            view = x.view(10, 100).t()
            x.add_(1)
            y = x * 2
    assert recorder.log.sizes == [4096, 4096]
    del view, y
    assert _live_bytes(recorder.log) == 4096  # y freed; x's storage alive through `x`


def test_free_waits_for_the_last_view():
    with FakeTensorMode():
        recorder = AllocationRecorder(vocab_size=10_000)
        with recorder:
            x = torch.empty(256)
            view = x[:10]
            del x
            assert _live_bytes(recorder.log) == 1024
            del view
            assert _live_bytes(recorder.log) == 0


def test_saved_tensors_stay_alive_until_backward_and_grads_get_their_role():
    with FakeTensorMode():
        w = torch.nn.Parameter(torch.empty(64, 64))  # 16 KiB
        recorder = AllocationRecorder(vocab_size=10_000)
        with recorder:
            recorder.register(w, WEIGHTS)
            recorder.set_phase(0, Phase.FORWARD)
            x = torch.empty(8, 64)  # 2 KiB input (no grad)
            hidden = (x @ w).relu()  # mm output dies, relu keeps its output for backward
            loss = hidden.sum()
            del hidden
            assert _live_bytes(recorder.log) == 16384 + 2048 + 2048 + 512
            recorder.set_phase(0, Phase.BACKWARD)
            loss.backward()
            recorder.mark(w.grad, GRADIENTS)
            del loss
        log = recorder.stop()
    result = replay(log, measured_step=0)
    # Peak when the weight gradient is allocated: weight, input, loss, its ones_like seed, relu's
    # input gradient (relu's saved output is released only after that node ran) and the gradient.
    assert result.peak_bytes == 16384 + 2048 + 512 + 512 + 2048 + 16384
    assert result.peak_phase is Phase.BACKWARD
    assert result.peak_breakdown == {"weights": 16384, "gradients": 16384, "optimizer_state": 0,
                                     "activations": 2048 + 512, "logits_loss": 0, "temporaries": 512 + 2048}
    assert result.peak_by_phase[Phase.FORWARD] == 16384 + 3 * 2048  # mm output alive while relu runs
    assert _live_bytes(log) == 16384 + 2048 + 16384  # weight, input, weight grad


def test_cuda_autocast_policy_differs_from_cpu_autocast():
    x = torch.randn(4, 8, dtype=torch.bfloat16)
    w = torch.randn(8, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        # The pitfall: CPU autocast leaves these in bf16, CUDA autocast runs them in fp32.
        assert F.layer_norm(x, (8,)).dtype is torch.bfloat16
        assert torch.softmax(x, -1).dtype is torch.bfloat16
        with CudaSemantics():
            assert F.layer_norm(x, (8,)).dtype is torch.float32
            assert F.softmax(x, dim=-1).dtype is torch.float32
            assert x.pow(3).dtype is torch.float32  # GPT-2's gelu_new runs in fp32 on CUDA
            assert torch.rsqrt(x.abs()).dtype is torch.float32
            assert x.sum().dtype is torch.float32
            assert F.softmax(x, dim=-1, dtype=torch.bfloat16).dtype is torch.bfloat16  # explicit dtype wins
            assert (x.float() @ w).dtype is torch.bfloat16  # matmuls: both lists agree
            assert torch.mv(w, w[0]).dtype is torch.bfloat16  # CUDA-only lower-precision op
    with CudaSemantics():  # no autocast: nothing changes
        assert F.layer_norm(x, (8,)).dtype is torch.bfloat16


def test_cuda_sdpa_backend_choice():
    assert cuda_sdpa_backend(torch.bfloat16, 32, 8, 128, False, True) is SDPBackend.FLASH_ATTENTION
    assert cuda_sdpa_backend(torch.bfloat16, 32, 32, 128, True, False) is SDPBackend.EFFICIENT_ATTENTION
    assert cuda_sdpa_backend(torch.float32, 32, 32, 128, False, False) is SDPBackend.EFFICIENT_ATTENTION
    assert cuda_sdpa_backend(torch.float32, 32, 8, 128, False, True) is SDPBackend.MATH  # no GQA in mem-eff
    assert cuda_sdpa_backend(torch.bfloat16, 8, 8, 512, False, False) is SDPBackend.EFFICIENT_ATTENTION


def _saved_by_sdpa(dtype, kv_heads, dropout):
    b, h, s, d = 1, 4, 128, 64
    saved = []
    with FakeTensorMode(), CudaSemantics():
        q = torch.empty(b, h, s, d, dtype=dtype, requires_grad=True)
        k = torch.empty(b, kv_heads, s, d, dtype=dtype, requires_grad=True)
        v = torch.empty(b, kv_heads, s, d, dtype=dtype, requires_grad=True)
        with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(tuple(t.shape)) or t, lambda t: t):
            F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=dropout, enable_gqa=kv_heads != h)
    return saved


def test_fused_sdpa_saves_output_and_logsumexp_only():
    # bf16 with dropout: CUDA flash drops out in-kernel; the CPU fused kernel (run without dropout)
    # keeps q, k, v, the output and a per-head fp32 logsumexp -- never b x h x s x s.
    saved = _saved_by_sdpa(torch.bfloat16, kv_heads=2, dropout=0.1)
    assert (1, 4, 128, 128) not in saved
    assert (1, 4, 128) in saved and (1, 4, 128, 64) in saved and (1, 2, 128, 64) in saved


def test_fp32_gqa_sdpa_materialises_scores_as_cuda_math_does():
    saved = _saved_by_sdpa(torch.float32, kv_heads=2, dropout=0.0)
    assert (1, 4, 128, 128) in saved


def test_packed_sequence_detection_is_positive_on_fake_tensors_and_patched():
    from transformers import masking_utils

    with FakeTensorMode():
        positions = torch.arange(16)[None]
        # The pitfall: on fake tensors transformers cannot look at the values, so it reports packing.
        assert masking_utils.find_packed_sequence_indices(positions) is not None
        with gpu_decisions():
            assert masking_utils.find_packed_sequence_indices(positions) is None


def test_gradient_sums_are_in_place_as_on_a_gpu():
    """A tied embedding gets two gradients; the engine sums a CUDA tensor's in place but a fake
    (subclass) tensor's out of place. The replay must count the GPU's way."""
    import dataclasses

    with FakeTensorMode():
        emb = torch.nn.Parameter(torch.empty(1000, 64))  # 256000 B
        recorder = AllocationRecorder(vocab_size=1000)
        with recorder:
            recorder.register(emb, WEIGHTS)
            recorder.set_phase(0, Phase.FORWARD)
            ids = torch.zeros(8, dtype=torch.long)
            logits = F.embedding(ids, emb) @ emb.t()
            loss = logits.sum()
            del logits
            recorder.set_phase(0, Phase.BACKWARD)
            loss.backward()
            recorder.mark(emb.grad, GRADIENTS)
        log = recorder.stop()
    # Peak at the embedding backward: weight, ids, loss, its seed, the LM-side gradient of the
    # weight, the input gradient of the lookup, and the lookup-side gradient of the weight.
    gpu_peak = 256000 + 512 + 512 + 512 + 256000 + 2048 + 256000
    result = replay(log, measured_step=0)
    assert result.peak_bytes == gpu_peak
    assert result.peak_breakdown["gradients"] == 256000  # the summed buffer becomes .grad
    unfolded = replay(dataclasses.replace(log, accumulations={}), measured_step=0)
    assert unfolded.peak_bytes > gpu_peak  # what the fake engine itself allocates


def _saved_by_dropout(mode) -> list:
    saved = []
    with FakeTensorMode(), mode:
        x = torch.empty(4, 8, dtype=torch.bfloat16, requires_grad=True)
        with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.dtype) or t, lambda t: t):
            F.dropout(x, p=0.1, training=True)
    return saved


def test_dropout_keeps_a_bool_mask_as_on_cuda():
    from contextlib import nullcontext

    assert _saved_by_dropout(nullcontext()) == [torch.bfloat16]  # CPU composite: noise in the input dtype
    assert _saved_by_dropout(CudaSemantics()) == [torch.bool]  # CUDA native_dropout: a bool mask

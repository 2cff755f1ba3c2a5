"""The fake GPU's measured memory: live tensor bytes of real CPU steps against numbers worked out by
hand from the shapes, against the fake-tensor tracer, and the out-of-memory decision built on them."""

from __future__ import annotations

import contextlib
import json

import pytest
import torch
from torch import nn

from frenzy.core.plan import ParallelPlan
from frenzy.core.training import Precision, TrainingConfig
from frenzy.memory.result import Phase
from frenzy.memory.trace.replay import replay
from frenzy.memory.trace.tracer import record_steps
from frenzy.train.config import WorkerConfig
from frenzy.train.cpu_matmul import Fp32Products
from frenzy.train.memory import MEASURED_STEPS, PEAK_MARKER, StepMeter, check_fake_capacity, peak_from_error
from frenzy.train.model import build_model, compute_precision

from .dist_helpers import SMALL_LLAMA

F32 = 4
BATCH, D_IN, D_HID, D_OUT = 64, 256, 512, 256


def _cfg(**over) -> WorkerConfig:
    fields = dict(job_id="j", attempt=1, model_name="m", family="llama", hf_config=SMALL_LLAMA, precision="fp32",
                  seq_len=32, global_batch=2, micro_batch=2, gpu_type="A10G-24G")
    fields.update(over)
    return WorkerConfig(**fields)


def _mlp_run(steps: int = 2, transient_bytes: int = 0):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(D_IN, D_HID), nn.ReLU(), nn.Linear(D_HID, D_OUT))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)  # CPU's default loop, explicit
    meter = StepMeter(_cfg(), model, optimizer)
    x = torch.randn(BATCH, D_IN)  # made before the step, like the worker's batch: not counted
    for step in range(1, steps + 1):
        with meter.measuring(step):
            if transient_bytes:
                torch.empty(transient_bytes, dtype=torch.uint8)  # allocated and freed at once
            loss = model(x).pow(2).mean()
            loss.backward()
            del loss
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    return meter


def _rounded(nbytes: int) -> int:  # the CUDA caching allocator's 512-byte blocks, worked out here
    return max(512, -(-nbytes // 512) * 512)


W1, B1 = _rounded(D_IN * D_HID * F32), _rounded(D_HID * F32)
W2, B2 = _rounded(D_HID * D_OUT * F32), _rounded(D_OUT * F32)
WEIGHTS = W1 + B1 + W2 + B2  # = 1,051,648 B: parameters; gradients and each Adam moment are as large


def test_mlp_adamw_peak_matches_the_hand_count():
    meter = _mlp_run()
    second = meter.steps[1]
    # Step 2 starts with weights + exp_avg + exp_avg_sq (AdamW's `step` counters are host memory on a
    # GPU). Its peak is in AdamW's per-parameter loop at W2: gradients are all alive, and
    # `denom = (exp_avg_sq.sqrt() / c).add_(eps)` holds sqrt and the quotient (2 x W2) while the
    # previous parameter's denom (B1's) is still bound to the loop variable.
    assert second.peak_phase is Phase.OPTIMIZER
    assert second.peak_bytes == 4 * WEIGHTS + 2 * W2 + B1 == 5_257_216
    # Forward: addmm's h (B x 512 fp32) and relu's r at once, or later r + o + o**2 + the mean: both
    # 4096 B per row, the latter plus the 512-B loss.
    assert second.peak_by_phase[Phase.FORWARD] == 3 * WEIGHTS + BATCH * (D_HID + D_HID) * F32 + 512
    assert meter.peak() == (second.peak_bytes, "measured-cpu")


def test_state_existing_at_the_step_start_is_counted():
    first, second = _mlp_run().steps
    # The same forward; only the optimizer state (2 x weights) existed before step 2 and not step 1.
    assert second.peak_by_phase[Phase.FORWARD] - first.peak_by_phase[Phase.FORWARD] == 2 * WEIGHTS


def test_a_tensor_freed_inside_the_step_raises_the_peak_not_the_end_state():
    transient = 8 * 2**20
    plain, scratched = _mlp_run(), _mlp_run(transient_bytes=transient)
    assert scratched.steps[1].peak_bytes == 3 * WEIGHTS + transient  # at the step start
    assert scratched.end_bytes == plain.end_bytes == [3 * WEIGHTS, 3 * WEIGHTS]


def test_only_the_first_steps_of_an_attempt_are_measured():
    meter = _mlp_run(steps=MEASURED_STEPS + 2)
    assert len(meter.steps) == MEASURED_STEPS
    assert meter.peak()[0] == max(r.peak_bytes for r in meter.steps)


def _llama_measured(precision: str, products=contextlib.nullcontext):
    cfg = _cfg(precision=precision)
    torch.manual_seed(0)
    model = build_model(cfg)
    model.train()
    # foreach=True is CUDA's AdamW default (the tracer's optimizer); CPU defaults to a per-tensor loop.
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    meter = StepMeter(cfg, model, optimizer)
    for step in (1, 2):
        with products(), meter.measuring(step):
            # as the worker does: the batch and its labels (prompt masked, as the tracer's) made in the step
            ids = torch.randint(0, SMALL_LLAMA["vocab_size"], (cfg.micro_batch, cfg.seq_len))
            labels = ids.clone()
            labels[:, : cfg.seq_len // 2] = -100
            with compute_precision(cfg, torch.device("cpu")):
                loss = model(input_ids=ids, labels=labels).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    return meter.steps[1]


@pytest.mark.parametrize("precision", ["fp32", "bf16-mixed"])
def test_small_llama_agrees_with_the_fake_tensor_trace(tmp_path, precision):
    measured = _llama_measured(precision)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(SMALL_LLAMA))
    cfg = _cfg(precision=precision)
    training = TrainingConfig(precision=Precision(precision))
    traced = replay(record_steps(str(path), training, ParallelPlan(micro_batch=cfg.micro_batch), cfg.seq_len).log, 1)
    # The step's peak is the optimizer's (foreach temporaries beside gradients and state), made of
    # the same tensors on both (within 0.5%), in both precisions.
    assert measured.peak_phase is traced.peak_phase is Phase.OPTIMIZER
    assert measured.peak_bytes == pytest.approx(traced.peak_bytes, rel=0.005)
    # Term by term the same tensors, but for one int64 [micro-batch, seq] block (512 B here) among the
    # activations: the batch's ids and labels are made inside this measured step, the trace's in its first.
    batch = 512
    assert abs(measured.peak_breakdown.pop("activations") - traced.peak_breakdown.pop("activations")) <= batch
    assert measured.peak_breakdown == traced.peak_breakdown
    # Forward and backward differ where the tracer emulates CUDA kernels: fp32 GQA attention runs
    # SDPA's math kernel on CUDA (scores kept), the CPU flash kernel here: forward 3.6% and backward
    # 3.5% lower (with the math kernel forced on CPU: forward +1.2%, backward -0.02%); bf16-mixed
    # (flash on both): forward +0.6% from CPU autocast's dtype lists, backward -0.02%. 5% bounds
    # these kernel differences, not noise: the measurement is deterministic.
    for phase in (Phase.FORWARD, Phase.BACKWARD):
        assert measured.peak_by_phase[phase] == pytest.approx(traced.peak_by_phase[phase], rel=0.05)


def test_bf16_products_in_fp32_measure_what_bf16_products_allocate():
    # The worker multiplies bf16 operands in fp32 below the meter (frenzy.train.cpu_matmul): the
    # meter must see the bf16 products a GPU allocates, not the fp32 temporaries, so both steps
    # measure the same bytes as with the CPU's own bf16 kernels.
    native, upcast = _llama_measured("bf16-mixed"), _llama_measured("bf16-mixed", Fp32Products)
    assert upcast.peak_bytes == native.peak_bytes
    assert upcast.peak_by_phase == native.peak_by_phase


def test_check_fake_capacity_raises_a_real_torch_oom_with_the_peak_marker():
    cfg = _cfg(fake_gpu=True, gpu_memory_bytes=10**6, emulate_peak_factor=1.8)
    with pytest.raises(torch.OutOfMemoryError) as caught:
        check_fake_capacity(cfg, 2, 600_000)
    assert f"{PEAK_MARKER}1080000" in str(caught.value) and peak_from_error(str(caught.value)) == 1_080_000
    check_fake_capacity(cfg, 2, 500_000)  # 900,000 B fits
    check_fake_capacity(cfg, 1, 600_000)  # step 1 is not MARP's step: never checked
    check_fake_capacity(_cfg(fake_gpu=False, gpu_memory_bytes=10**6, emulate_peak_factor=1.8), 2, 600_000)
    check_fake_capacity(_cfg(fake_gpu=True, gpu_memory_bytes=10**6), 2, 10**6)  # exactly full fits
    with pytest.raises(torch.OutOfMemoryError, match=f"{PEAK_MARKER}1180000"):  # the tensors fit, not beside the context
        check_fake_capacity(_cfg(fake_gpu=True, gpu_memory_bytes=10**6, emulate_peak_factor=1.8,
                                 runtime_overhead_bytes=280_000), 2, 500_000)


def _meter_rank(rank: int, world: int, port: int, out: str) -> None:
    """One gloo rank: the second step of DDP (zero 0), then of FSDP2 (zero 3), measured."""
    import os

    import torch.distributed as dist

    from frenzy.train.model import device_mesh, wrap_data_parallel
    from frenzy.train.optimization import make_optimizer

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    results = {}
    for zero in (0, 3):
        cfg = _cfg(dp=world, zero=zero, global_batch=2 * world)
        model = wrap_data_parallel(build_model(cfg), cfg, device_mesh(cfg, "cpu"), torch.device("cpu"))
        results[zero] = _two_steps(cfg, model, make_optimizer(model, cfg))
    dist.destroy_process_group()
    with open(f"{out}.{rank}", "w") as f:
        json.dump(results, f)


def _two_steps(cfg: WorkerConfig, model, optimizer) -> dict:
    meter = StepMeter(cfg, model, optimizer)
    ids = torch.randint(0, SMALL_LLAMA["vocab_size"], (cfg.micro_batch, cfg.seq_len),
                        generator=torch.Generator().manual_seed(0))
    for step in (1, 2):
        with meter.measuring(step):
            model(input_ids=ids, labels=ids).loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    return {"peak": meter.peak()[0], "end": meter.end_bytes[1], "source": meter.peak()[1]}


def test_ddp_counts_its_gradient_buckets_and_fsdp2_its_local_shards(tmp_path):
    import socket

    import torch.multiprocessing as mp

    from frenzy.train.optimization import make_optimizer

    model = build_model(_cfg())
    single = _two_steps(_cfg(), model, make_optimizer(model, _cfg()))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(_meter_rank, args=(2, port, str(tmp_path / "r")), nprocs=2, start_method="spawn")
    ranks = [json.loads((tmp_path / f"r.{rank}").read_text()) for rank in range(2)]
    bucket = _rounded(sum(p.numel() * p.element_size() for p in model.parameters()))  # one fp32 gradient copy
    for result in ranks:
        ddp, fsdp = result["0"], result["3"]
        # DDP: the same step plus its flat gradient bucket (gradient_as_bucket_view=False), alive throughout
        assert ddp["peak"] == single["peak"] + bucket and ddp["end"] == single["end"] + bucket
        # FSDP2 zero 3 over 2 ranks: weights and both Adam moments are half-shards between steps
        # (replicated rotary buffers and per-shard 512-byte rounding add < 1%).
        assert fsdp["end"] == pytest.approx(single["end"] / 2, rel=0.01)
        assert fsdp["peak"] < single["peak"] and fsdp["source"] == "measured-cpu"

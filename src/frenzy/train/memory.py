"""Memory telemetry of a worker and the fake-GPU OOM hook.

On CUDA the peak is `torch.cuda.max_memory_reserved` (what the caching allocator holds), and a too
small card is emulated with `set_per_process_memory_fraction`, so a real OOM takes the same path.
On CPU (fake-GPU mode) there is no device memory, so the worker measures it: `StepMeter` counts the
live tensor bytes of its own steps on the real tensors, as a CUDA device would hold them
(frenzy.train.live_bytes), and reports the largest step peak with source "measured-cpu". A step
whose measured peak times the job's `emulate_peak_factor` (a test hook: > 1 makes a job need more
than it measures, to force an OOM re-plan), plus the card's runtime overhead, exceeds the fake card
raises a genuine
`torch.OutOfMemoryError`, exactly as the CUDA allocator would. On CUDA the same factor becomes real
memory (`hold_emulated_excess`), so the card's own allocator decides.

Measuring costs a Python call per aten op, so only the first `MEASURED_STEPS` steps of an attempt
are measured: the second has the optimizer state alive from its start, which makes it the step
MARP predicts; later steps repeat it and report the largest peak measured.
"""

from __future__ import annotations

import contextlib
import re

import torch

from frenzy.core import cuda_oom
from frenzy.memory.result import Phase
from frenzy.memory.trace.allocator import round_size
from frenzy.memory.trace.recorder import GRADIENTS, HOST, OPTIMIZER_STATE, WEIGHTS
from frenzy.train.config import WorkerConfig
from frenzy.memory.trace.fsdp import following_resizes
from frenzy.train.live_bytes import LiveBytes, StepPeak

PEAK_MARKER = "frenzy-peak-bytes="
PEAK_PATTERN = re.compile(re.escape(PEAK_MARKER) + r"(\d+)")
MEASURED_STEPS = 2
HOST_STATE = frozenset({"step"})  # AdamW/Adam step counters: host memory on a GPU (non-capturable)


class StepMeter:
    """The memory peak of one attempt's training steps (one meter per attempt)."""

    def __init__(self, cfg: WorkerConfig, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                 busiest_rank: bool = False) -> None:
        self.cfg, self.model, self.optimizer = cfg, model, optimizer
        # Pipeline stages hold different layers: every rank reports the busiest rank's peak, the one
        # a card must fit (a collective after each measured step).
        self.busiest_rank = busiest_rank
        self.on_cuda = torch.cuda.is_available()
        self.peak_bytes = 0
        self.steps: list[StepPeak] = []  # one per measured step, for inspection
        self.end_bytes: list[int] = []  # live bytes after each measured step

    def measuring(self, step: int) -> contextlib.AbstractContextManager:
        """Wrap the whole step: every micro-batch, optimizer.step and zero_grad."""
        if self.on_cuda or len(self.steps) >= MEASURED_STEPS:
            return contextlib.nullcontext()
        return self._measure()

    def peak(self) -> tuple[int, str]:
        if self.on_cuda:
            return int(torch.cuda.max_memory_reserved()), "cuda"
        return self.peak_bytes, "measured-cpu"

    @contextlib.contextmanager
    def _measure(self):
        meter = LiveBytes()
        self._register_state(meter)
        ddp_buckets = _ddp_bucket_alloc(self.model, meter)
        handles = [self.optimizer.register_step_pre_hook(lambda *_: self._before_update(meter)),
                   self.optimizer.register_step_post_hook(lambda *_: self._mark_state(meter))]
        if ddp_buckets is not None and not self.model._has_rebuilt_buckets:
            handles.append(self.model.module.register_forward_pre_hook(
                lambda *_: _ddp_rebuilt(self.model, meter, ddp_buckets)))
        try:
            with following_resizes(meter), meter:
                yield
        finally:
            for handle in handles:
                handle.remove()
            meter.stop()
        result = meter.result()
        self.steps.append(result)
        self.end_bytes.append(meter.end_bytes())
        self.peak_bytes = max(self.peak_bytes, _busiest(result.peak_bytes) if self.busiest_rank else result.peak_bytes)

    def _register_state(self, meter: LiveBytes) -> None:
        for tensor in (*self.model.parameters(), *self.model.buffers()):
            meter.register(tensor, WEIGHTS)
        for p in self.model.parameters():
            meter.register(p.grad, GRADIENTS)
        for state in self.optimizer.state.values():
            for key, value in state.items():
                if isinstance(value, torch.Tensor):
                    meter.register(value, HOST if key in HOST_STATE else OPTIMIZER_STATE)

    def _before_update(self, meter: LiveBytes) -> None:
        for group in self.optimizer.param_groups:
            for p in group["params"]:
                meter.mark(p.grad, GRADIENTS)
        meter.set_phase(Phase.OPTIMIZER)

    def _mark_state(self, meter: LiveBytes) -> None:
        for state in self.optimizer.state.values():
            for key, value in state.items():
                if isinstance(value, torch.Tensor):
                    meter.mark(value, HOST if key in HOST_STATE else OPTIMIZER_STATE)


def _busiest(peak_bytes: int) -> int:
    import torch.distributed as dist

    peak = torch.tensor(peak_bytes, dtype=torch.int64)
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)
    return int(peak)


def _ddp_bucket_alloc(model: torch.nn.Module, meter: LiveBytes) -> int | None:
    """DDP's gradient buckets are tensors its C++ reducer made before the step: count their bytes
    (one flat bucket per dtype group, a copy of the gradients unless they are bucket views)."""
    from torch.nn.parallel import DistributedDataParallel

    if not isinstance(model, DistributedDataParallel) or model.gradient_as_bucket_view:
        return None
    size = sum(p.numel() * p.element_size() for p in model.module.parameters() if p.requires_grad)
    return meter.register_bytes(round_size(size), GRADIENTS) if size else None


def _ddp_rebuilt(model, meter: LiveBytes, alloc: int) -> None:
    # DDP rebuilds its buckets once, in the first forward after the first backward: the new ones are
    # aten allocations the meter sees; the old ones (counted at the step start) are freed then.
    if model._has_rebuilt_buckets:
        meter.release(alloc)


def limit_cuda_memory(cfg: WorkerConfig) -> None:
    """Make a larger real card behave like the (smaller) one the plan was made for."""
    if torch.cuda.is_available() and cfg.gpu_memory_bytes:
        total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
        if cfg.gpu_memory_bytes < total:
            torch.cuda.set_per_process_memory_fraction(cfg.gpu_memory_bytes / total)


def check_fake_capacity(cfg: WorkerConfig, step: int, measured_peak_bytes: int) -> None:
    """Raise torch.OutOfMemoryError where a card of `cfg.gpu_memory_bytes` would: when the step's
    measured tensor peak times `emulate_peak_factor`, plus the card's runtime overhead, exceeds it.
    Fake-GPU CPU workers only, from step 2 on (MARP's peak is that of the second step, optimizer
    state alive).

    The runtime overhead (CUDA context, kernels, cuBLAS workspace: MARP's `runtime_overhead`) is what
    a real card holds beside the tensors and a CPU cannot measure. The allocator's cached slack is
    not added: on a failed cudaMalloc PyTorch frees its cache and retries before raising, so a card
    runs out when tensors plus runtime do not fit (`required_bytes`, what decided the plan)."""
    if not cfg.fake_gpu or torch.cuda.is_available() or step < 2 or not cfg.gpu_memory_bytes:
        return
    overhead = cfg.runtime_overhead_bytes
    need = int(measured_peak_bytes * cfg.emulate_peak_factor) + overhead
    if need > cfg.gpu_memory_bytes:
        raise torch.OutOfMemoryError(
            f"CUDA out of memory (emulated on CPU by Frenzy's fake-GPU mode). The {cfg.gpu_type} has "
            f"{cfg.gpu_memory_bytes / 2**30:.2f} GiB and this step needs {need / 2**30:.2f} GiB ({measured_peak_bytes} "
            f"measured tensor bytes x emulate_peak_factor {cfg.emulate_peak_factor:g} + {overhead} runtime bytes; "
            f"{PEAK_MARKER}{need}).")


def hold_emulated_excess(cfg: WorkerConfig, step: int) -> torch.Tensor | None:
    """On CUDA, from the first step >= 2 on, a buffer of (emulate_peak_factor - 1) x MARP's prediction that the
    caller keeps alive: the job then really needs what the factor says (as an unmodelled buffer
    would), and a too-small card raises the allocator's own out-of-memory error."""
    if not torch.cuda.is_available() or step < 2 or cfg.emulate_peak_factor <= 1 or not cfg.predicted_peak_bytes:
        return None
    excess = int((cfg.emulate_peak_factor - 1) * cfg.predicted_peak_bytes)
    return torch.empty(excess, dtype=torch.uint8, device="cuda")


def with_peak(exc: torch.OutOfMemoryError) -> torch.OutOfMemoryError:
    """A CUDA OOM restated with the least the step needed (what was allocated plus what it asked
    for), in the marker `peak_from_error` reads, so the re-plan learns from the real failure."""
    requested = cuda_oom.requested_bytes(str(exc))
    if not torch.cuda.is_available() or requested is None or PEAK_MARKER in str(exc):
        return exc
    return torch.OutOfMemoryError(f"{exc} ({PEAK_MARKER}{torch.cuda.memory_allocated() + requested})")


def peak_from_error(text: str) -> int | None:
    match = PEAK_PATTERN.search(text)
    return int(match.group(1)) if match else None

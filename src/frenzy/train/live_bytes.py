"""Measure the live tensor bytes of one real training step on CPU, as a CUDA device would hold them.

The approach is the fake-tensor tracer's (frenzy.memory.trace.recorder), applied to real tensors: a
`TorchDispatchMode` sees every aten op's outputs; an output whose storage is not live and not one of
the op's inputs' storages (views and in-place results share an input's) is one allocation, sized as
the CUDA caching allocator serves it (`round_size`: 512-byte multiples); a weak reference to the
storage records its free (a storage's Python object lives exactly as long as the storage). What
exists when the step starts -- parameters, buffers, gradients, optimizer state -- is registered
first, by unique storage. The event stream is the tracer's `EventLog`, and its peaks are taken as
the tracer's `replay` takes them, so both count alike, including one correction: under any dispatch
mode the autograd engine sums a tensor's several gradients out of place (`old + new`), where a plain
run adds in place; those sums are folded back (frenzy.memory.trace.engine).

Counted: local tensors only. A DTensor (FSDP2 shards, tensor-parallel weights) counts its local
shard; collectives' buffers count when an aten op allocates them (FSDP2's all-gather output, DDP's
rebuilt buckets); storages FSDP2 frees or regrows with `UntypedStorage.resize_` are followed while
measuring. Host tensors of a GPU run (AdamW's `step` counters) are dropped, as the tracer drops them.
Not counted: storages allocated in C++ before the step that no parameter, gradient, buffer or
optimizer state reaches (DDP's initial gradient buckets: `StepMeter` adds their size), the input
batch made before the step, and anything outside aten (the allocator's cache, CUDA context, NCCL).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode, is_traceable_wrapper_subclass

from frenzy.memory.result import Phase
from frenzy.memory.trace.allocator import round_size
from frenzy.memory.trace.engine import fold_inplace_accumulations
from frenzy.memory.trace.recorder import ACTIVATIONS, HOST, TEMPORARIES, EventLog
from frenzy.memory.trace.replay import _Peaks

_SUM = torch.ops.aten.add.Tensor
_STRIDED = torch.strided
_PLAIN = (torch.Tensor, torch.nn.Parameter)


@dataclass(frozen=True, slots=True, kw_only=True)
class StepPeak:
    """The live-bytes peak of one measured step, with its phase and what was alive then by role."""

    peak_bytes: int
    peak_phase: Phase
    peak_breakdown: dict[str, int]
    peak_by_phase: dict[Phase, int]


def step_peak(log: EventLog) -> StepPeak:
    """`frenzy.memory.trace.replay` without its caching-allocator model (it costs a measured step
    more than the peak is worth): the same running peaks over the same folded event stream."""
    log = fold_inplace_accumulations(log)
    peaks = _Peaks(log, 0)
    for position, event in enumerate(log.events):
        if position in log.phase_positions:
            peaks.sample(position)
        alloc = abs(event) - 1
        if log.roles[alloc] == HOST:
            continue
        peaks.add(log.roles[alloc], log.sizes[alloc] if event > 0 else -log.sizes[alloc])
        if event > 0:
            peaks.sample(position)
    if len(log.events) in log.phase_positions:
        peaks.sample(len(log.events))
    return StepPeak(peak_bytes=max(peaks.best[0], 0), peak_phase=peaks.best[1], peak_breakdown=peaks.best[2],
                    peak_by_phase=peaks.by_phase)


def local_tensors(tensor: torch.Tensor) -> list[torch.Tensor]:
    """The plain tensors holding `tensor`'s data: itself, or a DTensor's (any traceable wrapper
    subclass's) inner tensors, recursively."""
    if type(tensor) in _PLAIN or not is_traceable_wrapper_subclass(tensor):
        return [tensor]
    names, _ = tensor.__tensor_flatten__()
    inners = (getattr(tensor, name) for name in names)
    return [local for inner in inners if isinstance(inner, torch.Tensor) for local in local_tensors(inner)]


def _storage(tensor: torch.Tensor):
    if tensor.layout is not _STRIDED or tensor.is_meta:
        return None
    try:
        return tensor.untyped_storage()
    except (RuntimeError, NotImplementedError):  # a subclass without storage: nothing of its own
        return None


class LiveBytes(TorchDispatchMode):
    """Record one step's allocations and frees; `result()` takes their peaks (live bytes, by phase)."""

    def __init__(self) -> None:
        super().__init__()
        self.log = EventLog()
        self.phase = Phase.FORWARD
        self._live: dict[int, int] = {}  # storage key -> allocation id
        self._refs: dict[int, weakref.ref] = {}  # allocation id -> weak reference firing its free
        self._released: set[int] = set()
        self._self_ref = weakref.ref(self)
        self._active = True
        self.log.phase_starts.append((0, 0, Phase.FORWARD))
        self.log.phase_positions.add(0)

    # ---- labelling ----------------------------------------------------------------------------

    def register(self, tensor: torch.Tensor | None, role: str) -> None:
        """Count a storage that exists before the step (once, however many tensors share it)."""
        if tensor is None:
            return
        for local in local_tensors(tensor):
            storage = _storage(local)
            if storage is not None and storage.nbytes() and storage._cdata not in self._live:
                self._allocate(storage, role)

    def register_bytes(self, nbytes: int, role: str) -> int:
        """Count bytes held by storages Python cannot reach (DDP's buckets); `release` frees them."""
        alloc = len(self.log.sizes)
        self.log.sizes.append(nbytes)
        self.log.roles.append(role)
        self.log.events.append(alloc + 1)
        return alloc

    def release(self, alloc: int) -> None:
        if self._active and alloc not in self._released:
            self._released.add(alloc)
            self.log.events.append(-(alloc + 1))

    def mark(self, tensor: torch.Tensor | None, role: str) -> None:
        """Give a live storage its final role (gradients, optimizer state, host)."""
        if tensor is None:
            return
        for local in local_tensors(tensor):
            storage = _storage(local)
            alloc = self._live.get(storage._cdata) if storage is not None else None
            if alloc is not None:
                self.log.roles[alloc] = role

    def set_phase(self, phase: Phase) -> None:
        if phase is not self.phase:
            self.phase = phase
            position = len(self.log.events)
            self.log.phase_starts.append((position, 0, phase))
            self.log.phase_positions.add(position)

    def resized(self, storage, before: int) -> None:
        """`UntypedStorage.resize_` (FSDP2 frees and regrows all-gather buffers so): a resize of a
        counted storage is its free plus, if it grows back, a new allocation."""
        if not self._active or storage.nbytes() == before:
            return
        alloc = self._live.pop(storage._cdata, None)
        if alloc is not None:
            self._refs.pop(alloc, None)  # its free is recorded now, not when the storage dies
            self.log.events.append(-(alloc + 1))
        if storage.nbytes():
            self._allocate(storage, TEMPORARIES if self.phase is not Phase.FORWARD else ACTIVATIONS)

    def stop(self) -> EventLog:
        self._active = False
        self._refs.clear()  # drops the weak references: no callback fires after this
        return self.log

    def end_bytes(self) -> int:
        """Live bytes (host tensors dropped) once the step is over."""
        freed = {-event - 1 for event in self.log.events if event < 0}
        return sum(size for alloc, (size, role) in enumerate(zip(self.log.sizes, self.log.roles))
                   if alloc not in freed and role != HOST)

    def result(self) -> StepPeak:
        return step_peak(self.log)

    # ---- dispatch -------------------------------------------------------------------------------

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # no torch.compile in a worker: spare every op the dynamo-disable wrapper

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **kwargs) if kwargs else func(*args)
        if not self._active:
            return out
        if self.phase is not Phase.OPTIMIZER:
            backward = torch._C._current_graph_task_id() != -1
            if backward is not (self.phase is Phase.BACKWARD):
                self.set_phase(Phase.BACKWARD if backward else Phase.FORWARD)
        if type(out) is torch.Tensor and out.layout is _STRIDED and not out.is_meta:
            storage = out.untyped_storage()  # the common case, kept lean: every op pays for it
            if storage._cdata not in self._live:
                self._output(storage, func, args, kwargs)
            return out
        for tensor in _tensors(out):
            for local in local_tensors(tensor):
                storage = _storage(local)
                if storage is not None and storage._cdata not in self._live:
                    self._output(storage, func, args, kwargs)
        return out

    def _output(self, storage, func, args, kwargs) -> None:
        """An output storage not live yet: a new allocation unless empty or an input's storage."""
        if not storage.nbytes() or (_aliases(func) and storage._cdata in _storage_keys(args, kwargs)):
            return  # a view of (or in place into) a storage made before measuring
        self._allocate(storage, ACTIVATIONS if self.phase is Phase.FORWARD else TEMPORARIES)
        if func is _SUM and self.phase is Phase.BACKWARD:
            operands = (self._live.get(k) for k in _storage_keys(args, {}))
            self.log.accumulations[len(self.log.sizes) - 1] = tuple(a for a in operands if a is not None)

    def _allocate(self, storage, role: str) -> None:
        key, alloc, log = storage._cdata, len(self.log.sizes), self.log
        log.sizes.append(round_size(storage.nbytes()))
        log.roles.append(role)
        log.events.append(alloc + 1)
        self._live[key] = alloc
        self._refs[alloc] = weakref.ref(storage, _free_callback(self._self_ref, key, alloc))


def _free_callback(meter_ref: weakref.ref, key: int, alloc: int):
    def free(_ref) -> None:
        meter = meter_ref()
        if meter is None or not meter._active or meter._refs.pop(alloc, None) is None:
            return
        if meter._live.get(key) == alloc:
            del meter._live[key]
        meter.log.events.append(-(alloc + 1))
    return free


_ALIASING: dict = {torch.ops.aten._unsafe_view.default: True}  # a view its schema does not annotate


def _aliases(func) -> bool:
    """Whether an output of `func` may share an input's storage (a view, an in-place or out= op),
    from its aten schema's alias annotations; other aten ops return fresh storages. Ops outside
    aten are always checked: c10d's in-place collectives (`allreduce_`) annotate no aliasing."""
    found = _ALIASING.get(func)
    if found is None:
        schema = getattr(func, "_schema", None)
        found = (schema is None or getattr(func, "namespace", "") != "aten"
                 or any(a.alias_info is not None for a in (*schema.arguments, *schema.returns)))
        _ALIASING[func] = found
    return found


def _tensors(value):
    """The tensors in an op's arguments or outputs: tensors, (nested) lists and tuples, dict values."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)


def _storage_keys(args, kwargs) -> list[int]:
    keys = []
    for tensor in _tensors((args, kwargs)):
        for local in local_tensors(tensor):
            storage = _storage(local)
            if storage is not None:
                keys.append(storage._cdata)
    return keys

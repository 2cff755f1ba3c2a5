"""Record every device allocation and free of a fake-tensor run, labelled by phase and role.

A `TorchDispatchMode` sees each aten op's outputs. An output whose storage is new (not live and not
an input's storage: views and in-place results share an input's storage) is one allocation, sized
as the CUDA allocator would serve it (512-byte rounding). A `weakref.finalize` on the storage
records its free: PyTorch keeps a storage's Python object alive as long as the storage itself, so
the finalizer fires when the last view, saved tensor or `.grad` lets go, exactly when the CUDA
allocator would get the block back.

Roles (the breakdown MARP predicts, term by term):
  weights          parameters and buffers, and dtype casts of them: autocast's 16-bit copies,
                   QLoRA's dequantised weights (casts of the packed codes) and its constants;
  gradients        `.grad` of parameters (marked when autograd accumulates them);
  optimizer_state  tensors held in `optimizer.state` (marked after each optimizer step);
  logits_loss      non-parameter tensors whose last dimension is the vocabulary, and the loss;
  activations      anything else allocated in forward (or in a forward re-run during backward,
                   i.e. activation recomputation);
  temporaries      anything else allocated in backward or in the optimizer step;
  host             tensors that live in host memory on a GPU (AdamW's step counters): dropped.
Roles are provisional at allocation and final after the run, because a backward temporary becomes
a gradient when AccumulateGrad steals its buffer.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from frenzy.memory.result import Phase
from frenzy.memory.trace.allocator import round_size

WEIGHTS, GRADIENTS, OPTIMIZER_STATE = "weights", "gradients", "optimizer_state"
ACTIVATIONS, LOGITS_LOSS, TEMPORARIES, HOST = "activations", "logits_loss", "temporaries", "host"
_CASTS = {torch.ops.aten._to_copy.default}
_SUM = torch.ops.aten.add.Tensor


@dataclass(slots=True)
class EventLog:
    """The run as data: allocation attributes by id, and the ordered stream of events.

    `events` holds `id + 1` for an allocation and `-(id + 1)` for its free. `marks` names event
    positions (e.g. where step 2 starts) so the replay can report live bytes there.
    """

    sizes: list[int] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    events: list[int] = field(default_factory=list)
    marks: dict[str, int] = field(default_factory=dict)
    phase_starts: list[tuple[int, int, Phase]] = field(default_factory=list)  # (position, step, phase)
    phase_positions: set[int] = field(default_factory=set)
    origins: list[str] = field(default_factory=list)  # "op shape dtype" per allocation, when kept
    # out-of-place gradient sums in backward: result id -> ids of its operands (see engine.py)
    accumulations: dict[int, tuple[int, ...]] = field(default_factory=dict)


def _key(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage()._cdata


class AllocationRecorder(TorchDispatchMode):
    """Enter it (innermost modes last) above the FakeTensorMode that runs the model."""

    def __init__(self, vocab_size: int, keep_origins: bool = False) -> None:
        super().__init__()
        self.keep_origins = keep_origins
        self.log = EventLog()
        self.vocab_size = vocab_size
        self.phase = Phase.FORWARD
        self.step = 0
        self.measured_step = 1  # the step whose forward is marked (step.run_steps sets it)
        self.recompute_depth = 0  # > 0 while a checkpointed layer re-runs its forward in backward
        self._live: dict[int, int] = {}  # storage key -> allocation id
        self._released: set[int] = set()  # allocations freed by resizing their storage to 0 (FSDP2)
        self.role_override: str | None = None  # a role for every allocation made meanwhile (FSDP2 all-gathers)
        self._active = True

    # ---- labelling API for the step loop ---------------------------------------------------------

    def register(self, tensor: torch.Tensor, role: str) -> None:
        """Count a storage that exists before recording starts (parameters, buffers, inputs)."""
        if tensor.untyped_storage().nbytes() and _key(tensor) not in self._live:
            self._allocate(tensor, role)

    def resized(self, storage: torch.UntypedStorage, before: int) -> None:
        """A storage resized in place: FSDP2 frees its unsharded parameters with `resize_(0)` and
        brings them back with `resize_(n)` on the same storage, which the allocator sees as a free
        and a new block."""
        if not self._active:
            return
        key, after = storage._cdata, storage.nbytes()
        if before and not after and key in self._live:
            alloc = self._live.pop(key)
            self._released.add(alloc)
            self.log.events.append(-(alloc + 1))
        elif after and not before and key not in self._live:
            role = self.role_override or (ACTIVATIONS if self.phase is Phase.FORWARD or self.recompute_depth
                                          else TEMPORARIES)
            self._allocate_storage(storage, role, "resize_")

    def mark(self, tensor: torch.Tensor | None, role: str) -> None:
        """Give a live storage its final role (a stolen gradient buffer, optimizer state)."""
        if tensor is None:
            return
        alloc = self._live.get(_key(tensor))
        if alloc is not None:
            self.log.roles[alloc] = role

    def set_phase(self, step: int, phase: Phase) -> None:
        self.step, self.phase = step, phase
        position = len(self.log.events)
        self.log.phase_starts.append((position, step, phase))
        self.log.phase_positions.add(position)
        self.log.marks[f"step{step}.{phase.value}"] = position  # the last micro-batch's, with grad_accum

    def mark_event(self, name: str) -> None:
        self.log.marks[name] = len(self.log.events)

    def stop(self) -> EventLog:
        """Stop listening for frees (finalizers may fire later, when the fake model is collected)."""
        self._active = False
        return self.log

    # ---- dispatch ---------------------------------------------------------------------------

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not self._active:
            return out
        input_keys = None
        for tensor in tree_leaves(out):
            # an op on FSDP2's DTensors reaches this mode before the DTensor's own dispatch: what it
            # allocates is the local tensor (the rank's shard)
            tensor = getattr(tensor, "_local_tensor", tensor)
            if not isinstance(tensor, torch.Tensor) or tensor.layout is not torch.strided:
                continue
            key = _key(tensor)
            if key in self._live or not tensor.untyped_storage().nbytes():
                continue
            if input_keys is None:
                input_keys = {_key(getattr(t, "_local_tensor", t)) for t in tree_leaves((args, kwargs))
                              if isinstance(t, torch.Tensor)}
            if key in input_keys:
                continue  # a view of a storage created before recording (not ours to count)
            self._allocate(tensor, self._role_of(func, tensor, args), func)
            if func is _SUM and self.phase is Phase.BACKWARD and not self.recompute_depth:
                locals_ = [getattr(t, "_local_tensor", t) for t in args if isinstance(t, torch.Tensor)]
                operands = tuple(self._live[_key(t)] for t in locals_ if _key(t) in self._live)
                self.log.accumulations[len(self.log.sizes) - 1] = operands
        return out

    def _role_of(self, func, tensor: torch.Tensor, args) -> str:
        if self.role_override:
            return self.role_override
        if func in _CASTS and isinstance(args[0], torch.Tensor):
            source = self._live.get(_key(args[0]))
            if source is not None and self.log.roles[source] == WEIGHTS:
                return WEIGHTS  # autocast's 16-bit copy of a weight
        if tensor.dim() and tensor.shape[-1] == self.vocab_size:
            return LOGITS_LOSS
        if self.phase is Phase.FORWARD or self.recompute_depth:
            return ACTIVATIONS
        return TEMPORARIES

    def _allocate(self, tensor: torch.Tensor, role: str, func=None) -> None:
        self._allocate_storage(tensor.untyped_storage(), role,
                               f"{func} {tuple(tensor.shape)} {str(tensor.dtype)[6:]}")

    def _allocate_storage(self, storage: torch.UntypedStorage, role: str, origin: str) -> None:
        if self.keep_origins:
            self.log.origins.append(origin)
        key = storage._cdata
        log = self.log
        alloc = len(log.sizes)
        log.sizes.append(round_size(storage.nbytes()))
        log.roles.append(role)
        log.events.append(alloc + 1)
        self._live[key] = alloc
        weakref.finalize(storage, self._free, key, alloc)

    def _free(self, key: int, alloc: int) -> None:
        if not self._active or alloc in self._released:
            return
        if self._live.get(key) == alloc:
            del self._live[key]
        self.log.events.append(-(alloc + 1))

"""Values for the small integer tensors that route a step, so data-dependent ops run on fake tensors.

Fake tensors carry shapes, not values. Most of a training step needs no values, but some families
route tokens to experts with ops whose output shape is the data: DBRX and LongCat-Flash loop over
`nonzero()` of the expert mask, JetMoE splits by `expert_size.tolist()`, ModernBERT-decoder unpads
by `nonzero()` of the attention mask. FakeTensorMode refuses those ops.

`KnownValues` keeps a real CPU copy beside each fake tensor whose values follow from the step's own
inputs: the token ids, tensors made without tensor inputs or from shapes alone (`zeros`, `arange`,
`*_like`), and whatever is computed from known tensors only (the routing's one-hot masks, counts and
sorts). A router's choice among its experts (`topk`, `argmax`, `sort` on unknown scores) is made
known as a balanced assignment: token t takes experts t*k .. t*k+k-1 (mod n), the load a router
trained with a balance loss aims for, and close to what a randomly initialised router gives. A
data-dependent op whose deciding inputs are known then runs on the copies, and its outputs are fakes
of the copies' shapes. Floating inputs it does not know (the hidden states an index selects) do not
decide a shape: a single zero read at every index stands in for each (it allocates one element,
so only the op's own output, at most the rows it selects, is ever as large as an activation), and
what the op makes from them stays unknown. One it cannot decide (a `nonzero` of activations) still
raises FakeTensorMode's error.

The memory follows from the sizes alone: with a loop over experts, the sum of the experts' rows is
tokens x top-k whatever the balance, so the balanced routing changes only how that sum is split.
A tensor written in place by an op that is not known loses its copy (and so do its views).
Copies are kept for tensors of at most `MAX_KNOWN_ELEMENTS` (the routing masks: tokens x top-k x
experts); larger ones are payload, never a routing decision.
"""

from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException, FakeTensor
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils._pytree import tree_leaves, tree_map
from torch.utils.weak import WeakTensorKeyDictionary

MAX_KNOWN_ELEMENTS = 1 << 25

aten = torch.ops.aten
# Ops whose tensor arguments give only a shape, dtype and device: their outputs are known.
_SHAPE_ONLY_INPUTS = {
    aten.zeros_like.default, aten.ones_like.default, aten.full_like.default, aten.empty_like.default,
    aten.new_zeros.default, aten.new_ones.default, aten.new_full.default, aten.new_empty.default,
    aten.new_empty_strided.default,
}
# A router's choice among n candidates on dim `dim`: (op, index of the indices output).
_CHOICES = {aten.topk.default: 1, aten.sort.default: 1, aten.sort.stable: 1, aten.max.dim: 1, aten.argmax.default: 0}


class KnownValues(TorchDispatchMode):
    """Enter it above the FakeTensorMode that runs the step (and below the recorder, which then sees
    the outputs it makes)."""

    def __init__(self) -> None:
        super().__init__()
        self._values = WeakTensorKeyDictionary()  # fake tensor -> its real CPU copy
        self._storages: set[int] = set()  # storage keys of fakes with copies (may hold freed keys)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        fakes = [t for t in tree_leaves((args, kwargs)) if isinstance(t, FakeTensor)]
        unknown = [t for t in fakes if t not in self._values]
        if func is aten._local_scalar_dense.default and not unknown and fakes:
            with _disable_current_modes():
                return self._values[fakes[0]].item()
        try:
            out = func(*args, **kwargs)
        except (DynamicOutputShapeException, DataDependentOutputException):
            # integer and boolean tensors decide shapes (masks, indices, counts); an op of one tensor
            # (nonzero, unique, item) is decided by that tensor's values whatever its type
            if any(not t.is_floating_point() for t in unknown) or (unknown and len(fakes) == 1):
                raise
            return self._run_on_copies(func, args, kwargs, unknown)
        if func in _CHOICES and unknown:
            self._remember(out, func, args, kwargs)
            return out
        if not unknown or func in _SHAPE_ONLY_INPUTS:
            if all(t.numel() <= MAX_KNOWN_ELEMENTS for t in _tensors(out)):
                real = self._real(func, args, kwargs, stand_in_unknown=func in _SHAPE_ONLY_INPUTS)
                self._pair(out, real)
        elif func._schema.is_mutable:
            self._forget_written(func, args, kwargs)
        return out

    # ---- copies ----------------------------------------------------------------------------------

    def _real(self, func, args, kwargs, stand_in_unknown: bool):
        def copy(value):
            if isinstance(value, FakeTensor):
                if value in self._values:
                    return self._values[value]
                if stand_in_unknown:  # one element, read everywhere: nothing as large as the payload
                    return torch.zeros((), dtype=value.dtype).expand(value.shape)
            if isinstance(value, torch.device):
                return torch.device("cpu")
            return value

        with _disable_current_modes():  # the stand-ins too: made under the fake mode, they would be fakes
            real_args, real_kwargs = tree_map(copy, (args, kwargs))
            return func(*real_args, **real_kwargs)

    def _run_on_copies(self, func, args, kwargs, unknown: list) -> object:
        """A data-dependent op: the copies decide the output shapes; the outputs are new fakes, known
        only if every input was (the rows a known mask selects from activations are activations)."""
        real = self._real(func, args, kwargs, stand_in_unknown=True)
        device = next(t.device for t in tree_leaves((args, kwargs)) if isinstance(t, FakeTensor))
        out = tree_map(lambda r: torch.empty_strided(r.shape, r.stride(), dtype=r.dtype, device=device)
                       if isinstance(r, torch.Tensor) else r, real)
        if not unknown:
            self._pair(out, real)
        return out

    def _pair(self, out, real) -> None:
        for fake, copy in zip(tree_leaves(out), tree_leaves(real)):
            if isinstance(fake, FakeTensor) and isinstance(copy, torch.Tensor):
                self._values[fake] = copy
                self._storages.add(_storage_key(fake))

    def _remember(self, out, func, args, kwargs) -> None:
        """A choice on unknown scores becomes the balanced assignment."""
        indices, scores = out[_CHOICES[func]], args[0]
        if indices.numel() > MAX_KNOWN_ELEMENTS:
            return
        dim = _choice_dim(func, args, kwargs) % max(scores.dim(), 1)
        n = scores.shape[dim] if scores.dim() else 1
        kept = indices.dim() == scores.dim()  # topk, sort, keepdim: the choice dim holds the picks
        shape = list(indices.shape)
        picks = shape.pop(dim) if kept else 1
        rows = indices.numel() // max(picks, 1)
        # k of n picks per row: rows take consecutive blocks of k; a full sort rotates by one per row
        step = picks if picks < n else 1
        with _disable_current_modes():
            balanced = (torch.arange(rows).unsqueeze(-1) * step + torch.arange(picks)) % n
            balanced = balanced.reshape(*shape, picks)
            balanced = balanced.movedim(-1, dim) if kept else balanced.squeeze(-1)
            balanced = balanced.to(indices.dtype).contiguous()
        self._pair(indices, balanced)

    def _forget_written(self, func, args, kwargs) -> None:
        """An op that is not known wrote into these tensors: their copies, and their views', are stale."""
        for written in _written(func, args, kwargs):
            key = _storage_key(written)
            if key in self._storages:
                for fake in [f for f in self._values.keys() if _storage_key(f) == key]:
                    del self._values[fake]
                self._storages.discard(key)


def run_retrying_with_known_values(run):
    """`run(known_values=False)`, and where it meets a data-dependent op `run(known_values=True)`:
    keeping values costs a family that routes by none twice the tracing time for nothing."""
    try:
        return run(known_values=False)
    except (DynamicOutputShapeException, DataDependentOutputException):
        return run(known_values=True)


def _choice_dim(func, args, kwargs) -> int:
    if func is aten.topk.default:
        return kwargs.get("dim", args[2] if len(args) > 2 else -1)
    if func is aten.argmax.default:
        dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
        return -1 if dim is None else dim
    if func is aten.sort.stable:
        return kwargs.get("dim", -1)
    return kwargs.get("dim", args[1] if len(args) > 1 else -1)


def _written(func, args, kwargs):
    schema = func._schema.arguments
    for position, argument in enumerate(schema):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        value = args[position] if position < len(args) else kwargs.get(argument.name)
        yield from (t for t in tree_leaves(value) if isinstance(t, FakeTensor))


def _tensors(out):
    return [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]


def _storage_key(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage()._cdata

"""Data-dependent ops on fake tensors: the values of the small tensors that route a step."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch._subclasses.fake_tensor import (  # noqa: E402
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensorMode,
)
from torch.nn import functional as F  # noqa: E402

from frenzy.memory.trace.known_values import KnownValues  # noqa: E402

TOKENS, EXPERTS, TOP_K, HIDDEN = 24, 6, 2, 8


def _expert_loop(hidden, top_k_index):
    """The routing of a loop over experts as DBRX, JetMoE and LongCat-Flash write it: which experts
    are hit, the rows each one gathers, and the per-expert counts as Python ints."""
    mask = F.one_hot(top_k_index, num_classes=EXPERTS).permute(2, 1, 0)
    hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()
    rows = []
    for expert in hit:
        _, token = torch.where(mask[expert[0]])
        rows.append(hidden[token].shape[0])
    counts = mask.sum(dim=(1, 2)).tolist()
    parts = hidden.repeat_interleave(TOP_K, dim=0)[top_k_index.flatten().argsort()].split(counts)
    return rows, counts, [p.shape[0] for p in parts]


def _balanced_top_k() -> torch.Tensor:
    # token t takes experts t*k .. t*k+k-1 (mod n), written out independently of the module
    return torch.tensor([[(t * TOP_K + j) % EXPERTS for j in range(TOP_K)] for t in range(TOKENS)])


def test_an_expert_loop_on_fake_tensors_routes_as_the_same_routing_does_on_real_tensors():
    real = _expert_loop(torch.randn(TOKENS, HIDDEN), _balanced_top_k())
    with FakeTensorMode():
        hidden, router = torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, EXPERTS)  # made before: unknown
        with KnownValues():
            scores = hidden @ router  # a router's logits: values no fake tensor has
            fake = _expert_loop(hidden, scores.topk(TOP_K, dim=-1).indices)
    assert fake == real
    # balanced: every expert gathers tokens x top-k / experts rows
    assert fake[0] == [TOKENS * TOP_K // EXPERTS] * EXPERTS


def test_an_unpadding_mask_built_from_sizes_is_known():
    with FakeTensorMode(), KnownValues():
        mask = torch.ones(2, 8, dtype=torch.long)
        mask[1, 5:] = 0
        kept = mask.flatten().nonzero()
        longest = int(mask.sum(-1).max().item())
    assert kept.shape == (13, 1) and longest == 8


def test_a_shape_decided_by_values_no_one_knows_is_still_refused():
    with FakeTensorMode():
        activations = torch.randn(16)  # made before: a model's weights and what follows from them
        with KnownValues(), pytest.raises(DynamicOutputShapeException):
            activations.gt(0).nonzero()
        with KnownValues(), pytest.raises(DataDependentOutputException):
            activations.sum().item()
        with KnownValues(), pytest.raises(DynamicOutputShapeException):
            torch.nonzero(activations)  # a float tensor decides the shape of its own nonzero()


def test_a_tensor_written_with_unknown_values_forgets_its_copy_and_its_views_do_too():
    with FakeTensorMode():
        noise = torch.randn(2, 8)  # made before: unknown
        known = KnownValues()
        with known:
            ids = torch.randint(0, 4, (2, 8))
            row = ids[0]
            assert row.nonzero().shape[1] == 1  # known before the write
            ids.add_(noise.long())
        for tensor in (ids, row):
            with known, pytest.raises(DynamicOutputShapeException):
                tensor.nonzero()


def test_rows_a_known_mask_selects_from_activations_take_its_shape_stay_unknown_and_cost_only_those_rows():
    rows, width = 1 << 20, 1 << 20
    with FakeTensorMode():
        activations = torch.randn(rows, width)  # 4 TiB of float32 if it were real: no stand-in may be
        with KnownValues():
            mask = torch.arange(rows) % (rows // 2) == 0
            picked = activations[mask]
            assert picked.shape == (2, width)
            with pytest.raises(DynamicOutputShapeException):
                picked.gt(0).nonzero()  # what the rows hold is as unknown as the activations

"""bf16 products on the fake GPU: computed in fp32 and rounded to bf16, as a GPU's tensor cores do."""

from __future__ import annotations

import pytest
import torch

from frenzy.train.cpu_matmul import Fp32Products, products_in_fp32


@pytest.mark.parametrize("op", ["mm", "addmm", "bmm", "baddbmm"])
def test_a_bf16_product_is_the_exact_product_rounded_once(op):
    torch.manual_seed(0)
    batched = op in ("bmm", "baddbmm")
    shape_a, shape_b, shape_c = ((3, 64, 96), (3, 96, 32), (3, 64, 32)) if batched else ((64, 96), (96, 32), (64, 32))
    a, b, c = (torch.randn(s).bfloat16() for s in (shape_a, shape_b, shape_c))
    args = (c, a, b) if op.startswith(("add", "badd")) else (a, b)
    with Fp32Products():
        got = getattr(torch, op)(*args)
    # The reference in float64 from the same bf16 operands: the only error left is the one rounding to
    # bf16 (half an ulp, 2**-8 relative) plus fp32 accumulation (far smaller).
    exact = getattr(torch, op)(*(t.double() for t in args))
    assert got.dtype == torch.bfloat16
    assert torch.allclose(got.double(), exact, rtol=2**-8, atol=1e-6)


def test_other_dtypes_and_ops_pass_through_unchanged():
    a = torch.randn(8, 8)
    with Fp32Products():
        assert torch.equal(a @ a, torch.mm(a, a))
        assert (a.bfloat16() + 1).dtype == torch.bfloat16


def test_only_the_cpu_gets_the_mode():
    assert isinstance(products_in_fp32(torch.device("cpu")), Fp32Products)
    assert not isinstance(products_in_fp32(torch.device("meta")), Fp32Products)

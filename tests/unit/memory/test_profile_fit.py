"""The profile's fit B(mb, s) = mb*s*(a + q*s) + r*s, checked on hand-made numbers."""

import pytest

pytest.importorskip("torch", reason="the profile module imports the tracer")

from frenzy.memory.trace.profile import _terms  # noqa: E402


def test_linear_quadratic_and_per_position_terms_are_separated():
    a, q, r = 3000.0, 2.5, 1024.0  # r: e.g. a layer's own fp32 cos/sin tables, 128 wide, shared by the batch

    def b(mb, s):
        return mb * s * (a + q * s) + r * s

    terms = _terms(b(1, 256), b(2, 256), b(1, 512), 256, 512)
    assert terms["per_token"] == pytest.approx(a)
    assert terms["per_token_per_seq"] == pytest.approx(q)
    assert terms["per_position"] == pytest.approx(r)

"""The profile's fit B(mb, s) = C + mb*s*(a + q*s), checked on hand-made numbers."""

import pytest

pytest.importorskip("torch", reason="the profile module imports the tracer")

from frenzy.memory.trace.profile import _terms  # noqa: E402


def test_linear_quadratic_and_constant_terms_are_separated():
    a, q, c = 3000.0, 2.5, 4096.0

    def b(mb, s):
        return c + mb * s * (a + q * s)

    terms = _terms(b(1, 256), b(2, 256), b(1, 512), 256, 512)
    assert terms["per_token"] == pytest.approx(a)
    assert terms["per_token_per_seq"] == pytest.approx(q)

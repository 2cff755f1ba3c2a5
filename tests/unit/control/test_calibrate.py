"""The calibration rule of frenzy.memory.calibrate, checked against hand-computed values."""

from __future__ import annotations

import pytest

from frenzy.memory import calibrate
from frenzy.memory.calibrate import MAX_FACTOR, MIN_FACTOR, Correction, observe


def test_first_sample_takes_the_observed_ratio():
    c = observe(Correction(family="llama", gpu_type="A10G-24G"), predicted_bytes=100, observed_bytes=112)
    assert c.factor == pytest.approx(1.12) and c.samples == 1


def test_later_samples_blend_with_weight_alpha():
    c = Correction(family="llama", gpu_type="A10G-24G", factor=1.10, samples=5)
    # weight max(1/6, 0.3) = 0.3: 0.7 * 1.10 + 0.3 * 1.00 = 1.07
    assert observe(c, 100, 100).factor == pytest.approx(1.07)


def test_bounded_both_ways():
    c = Correction(family="gpt2", gpu_type="T4-16G")
    assert observe(c, 100, 1000).factor == MAX_FACTOR
    assert observe(c, 100, 10).factor == MIN_FACTOR


def test_oom_never_lowers_and_covers_the_sample():
    c = Correction(family="llama", gpu_type="A10G-24G", factor=1.05, samples=10)
    after = observe(c, 100, 130, oom=True)
    assert after.factor == pytest.approx(1.30)
    assert observe(c, 100, 90, oom=True).factor == pytest.approx(1.05)


def test_out_of_bounds_factor_rejected():
    with pytest.raises(ValueError, match="outside"):
        Correction(family="x", gpu_type="y", factor=2.0)


def test_apply_filters_plans_that_no_longer_fit():
    from frenzy.core import catalog
    from frenzy.core.hf_config import load_model
    from frenzy.core.job import JobSpec
    from frenzy.memory.plans import plan_job

    job = JobSpec(model=load_model("gpt2"), seq_len=1024, global_batch=8)
    choices = plan_job(job, [catalog.gpu_type("A10G-24G")])
    tight = [c for c in choices if c.memory.device_bytes * 1.4 > c.usable_bytes]
    kept = calibrate.apply(choices, lambda _g: 1.4)
    assert len(kept) == len(choices) - len(tight)

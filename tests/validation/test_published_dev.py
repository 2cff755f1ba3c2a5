"""MARP against the published development measurements (../shared/memory): the issue's target is a
median absolute error of at most 5% over the rows MARP can express."""

import statistics

import pytest

from frenzy.memory.estimate import estimate
from frenzy.memory.measurements import load_measurements


@pytest.fixture
def measurements(shared_dir):
    return load_measurements(shared_dir / "memory" / "published_measurements_dev.csv")


def test_median_error_on_expressible_rows_is_within_5_percent(measurements):
    errors = [abs(m.predicted_bytes(estimate(m.job, m.plan)) - m.measured_bytes) / m.measured_bytes
              for m in measurements if m.expressible]
    assert len(errors) >= 8
    assert statistics.median(errors) <= 0.05


def test_every_row_is_expressed_or_has_a_reason(measurements):
    for m in measurements:
        assert m.expressible or m.reason, m.label


def test_units_follow_the_notes(measurements):
    litgpt = [m for m in measurements if "litgpt" in m.row["source"] and m.expressible]
    assert litgpt and all(m.unit_bytes == 10**9 for m in litgpt)  # LitGPT prints max_memory_allocated / 1e9

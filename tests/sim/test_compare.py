"""Comparing two policies' JCTs over the jobs both finished."""

import pytest

from frenzy.sim.result import compare_finished

H = 3600.0


def _jobs(**jct_h):
    return [{"job_id": k, "jct_s": None if v is None else v * H} for k, v in jct_h.items()]


def test_a_job_given_up_on_leaves_both_sides_of_the_comparison():
    # The other policy gave up on the 10 h job: over its own finished jobs its average (2 h) beats
    # ours (13/3 h), but over the two jobs both finished ours sums to 3 h against its 4 h.
    ours, theirs = _jobs(a=1, b=2, c=10), _jobs(a=2, b=2, c=None)
    versus = compare_finished(ours, theirs)
    assert versus.jobs == 2
    assert versus.avg_cut == pytest.approx(1 - 3 / 4)


def test_p99_is_taken_over_the_same_jobs():
    ours = _jobs(**{f"j{i}": 1.0 for i in range(99)}, slow=50.0, lost=None)
    theirs = _jobs(**{f"j{i}": 2.0 for i in range(99)}, slow=10.0, lost=300.0)
    # numpy's linear percentile over 100 values: the 99th lies 1% of the way from the 99th to the 100th value.
    assert compare_finished(ours, theirs).p99_ratio == pytest.approx((1 + 0.01 * 49) / (2 + 0.01 * 8))


def test_runs_with_no_job_in_common_cannot_be_compared():
    with pytest.raises(ValueError, match="no job in common"):
        compare_finished(_jobs(a=1, b=None), _jobs(a=None, b=2))

"""ParallelPlan.varied, the enumeration's fast copy, gives what dataclasses.replace gives, field for
field: a field added to ParallelPlan and not carried by varied() fails here."""

from dataclasses import fields, replace

import pytest

from frenzy.core.plan import MixedPrecisionMode, ParallelPlan
from frenzy.core.training import Recompute, ZeroStage

# every field away from its default, so a field varied() forgets shows as a difference
PLAN = ParallelPlan(dp=4, tp=2, pp=2, zero=ZeroStage.GRADIENTS, micro_batch=3, grad_accum=5,
                    recompute=Recompute.FULL, sequence_parallel=True, mixed_precision=MixedPrecisionMode.FSDP2_PARAM)


def test_every_field_differs_from_its_default_in_the_plan_checked():
    default = ParallelPlan()
    assert all(getattr(PLAN, f.name) != getattr(default, f.name) for f in fields(ParallelPlan))


@pytest.mark.parametrize("change", [{}, {"micro_batch": 1, "grad_accum": 15},
                                    {"mixed_precision": MixedPrecisionMode.AUTOCAST}])
def test_varied_is_replace(change):
    assert PLAN.varied(**change) == replace(PLAN, **change)


def test_varied_checks_like_the_constructor():
    with pytest.raises(ValueError, match="micro_batch must be >= 1"):
        PLAN.varied(micro_batch=0)

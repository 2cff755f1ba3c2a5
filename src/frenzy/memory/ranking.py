"""Orders in which a job's feasible plans are offered to the scheduler (first = preferred).

A ranking is a key function over PlanChoice; `RANKINGS` maps an objective name to one. The perf
model (frenzy.perf) will replace these proxies with predicted finish time and cost.
"""

from __future__ import annotations

from frenzy.memory.plans import PlanChoice, RankKey, rank_by_gpus_then_headroom


def rank_by_hourly_cost(choice: PlanChoice) -> tuple:
    """Cheapest per hour (GPUs x price per GPU-hour), then the most headroom."""
    hourly = choice.num_gpus * choice.gpu.price_per_gpu_hour_usd
    return (hourly, -choice.headroom_fraction, choice.gpu.name)


RANKINGS: dict[str, RankKey] = {
    "time": rank_by_gpus_then_headroom,
    "cost": rank_by_hourly_cost,
}

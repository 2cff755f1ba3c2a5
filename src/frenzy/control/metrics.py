"""Prometheus metrics. Gauges are read from the store at scrape time (so they are right after a
restart); latency is observed as placements happen."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from frenzy.control.records import JobRecord
from frenzy.control.states import AttemptOutcome, JobState


class StoreCollector:
    def __init__(self, service):
        self.service = service

    def collect(self):
        store = self.service.store
        counts = store.count_by_state()
        yield _gauge("frenzy_queue_length", "jobs waiting for GPUs (queued + planning)",
                     counts[JobState.QUEUED] + counts[JobState.PLANNING])
        yield _gauge("frenzy_running_jobs", "jobs placed or running", counts[JobState.PLACED] + counts[JobState.RUNNING])
        states = GaugeMetricFamily("frenzy_jobs", "jobs by state", labels=["state"])
        for state, n in counts.items():
            states.add_metric([state.value], n)
        yield states
        used = GaugeMetricFamily("frenzy_gpus_used", "GPUs allocated, per GPU type", labels=["gpu_type"])
        total = GaugeMetricFamily("frenzy_gpus_total", "GPUs on live nodes, per GPU type", labels=["gpu_type"])
        view = self.service.cluster()
        for gpu, row in view.by_type.items():
            used.add_metric([gpu], row["used"])
            total.add_metric([gpu], row["total"])
        yield used
        yield total
        yield from _teams(view.teams)
        active = store.list_jobs([JobState.PLACED, JobState.RUNNING])
        yield from _memory(active)
        yield from _losses(active)
        ooms = CounterMetricFamily("frenzy_oom_replans", "attempts that ran out of memory (each re-plans the job)")
        ooms.add_metric([], self.service.loop.counters.oom_replans)
        yield ooms


def _memory(active: list[JobRecord]):
    predicted = GaugeMetricFamily("frenzy_job_predicted_peak_bytes", "MARP's per-GPU peak for the running plan",
                                  labels=["job", "gpu_type"])
    observed = GaugeMetricFamily("frenzy_job_observed_peak_bytes", "largest observed per-GPU peak of the attempt",
                                 labels=["job", "gpu_type"])
    risk = GaugeMetricFamily("frenzy_job_at_risk", "1 if the observed peak is within 5% of the GPU's memory",
                             labels=["job", "gpu_type"])
    for job in active:
        if not job.chosen:
            continue
        labels = [job.id, job.gpu_type]
        predicted.add_metric(labels, job.chosen["memory"]["device_bytes"])
        peaks = job.progress.get("peak_bytes") or []
        if peaks:
            observed.add_metric(labels, max(peaks))
        risk.add_metric(labels, 1 if job.at_risk else 0)
    yield predicted
    yield observed
    yield risk


def _losses(active: list[JobRecord]):
    """The training and validation loss of running jobs (the latest step reported)."""
    for key, doc in (("loss", "training loss (mean per loss token) of the latest step"),
                     ("eval_loss", "validation loss at the latest evaluation")):
        family = GaugeMetricFamily(f"frenzy_job_{key}", doc, labels=["job"])
        for job in active:
            if job.progress.get(key) is not None:
                family.add_metric([job.id], float(job.progress[key]))
        yield family


def _teams(teams: dict):
    """Per team and GPU type: nominal quota, GPUs used, GPUs borrowed beyond the quota."""
    docs = {"quota": "a team's nominal GPU quota", "used": "GPUs a team's placed and running jobs hold",
            "borrowed": "GPUs a team holds beyond its nominal quota (idle quota of other teams)"}
    for key, doc in docs.items():
        family = GaugeMetricFamily(f"frenzy_team_{key}_gpus", f"{doc}, per GPU type", labels=["team", "gpu_type"])
        for team, types in teams.items():
            for gpu, row in types.items():
                family.add_metric([team, gpu], row[key])
        yield family


def _gauge(name, doc, value):
    g = GaugeMetricFamily(name, doc)
    g.add_metric([], value)
    return g


def build_registry(service) -> tuple[CollectorRegistry, Histogram]:
    registry = CollectorRegistry()
    registry.register(StoreCollector(service))
    latency = Histogram("frenzy_scheduling_latency_seconds", "submission to first placement",
                        buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 1800), registry=registry)
    service.loop.listeners.on_placed.append(
        lambda job, seconds: latency.observe(seconds) if job.attempts == 1 else None)
    return registry, latency


__all__ = ["build_registry", "AttemptOutcome"]

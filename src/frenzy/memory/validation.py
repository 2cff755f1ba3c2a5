"""MARP against the fake-tensor trace of the real training step, configuration by configuration.

A `Case` names a model (catalog name, or a catalog config shrunk to a few layers so it traces in
seconds), training settings and a plan. `compare` runs both and reports the allocated-peak error
and the per-term differences at the peak. The trace runs the real Hugging Face code, so where
the two disagree the formula is what gets fixed.

Terms are compared with a floor: a term within 5% of itself, or within 0.5% of the allocated peak
(a term of a few MiB beside a 20 GiB peak is allowed a few MiB of rounding).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from frenzy.core import catalog
from frenzy.core.hf_config import load_model
from frenzy.core.job import JobSpec
from frenzy.core.plan import ParallelPlan
from frenzy.core.training import TrainingConfig
from frenzy.memory.estimate import estimate
from frenzy.memory.result import MemoryEstimate

PEAK_TOLERANCE = 0.03
TERM_TOLERANCE = 0.05
TERM_FLOOR_OF_PEAK = 0.005
COMPARED_TERMS = ("weights", "gradients", "optimizer_state", "activations", "logits_loss", "temporaries")


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    model: str  # catalog name
    training: TrainingConfig
    plan: ParallelPlan
    seq_len: int
    layers: int | None = None  # shrink the catalog config to this many layers (fast cases)
    overrides: tuple[tuple[str, object], ...] = ()  # further config changes, e.g. a small MoE

    @property
    def label(self) -> str:
        t, p = self.training, self.plan
        shrunk = f"[{self.layers}L]" if self.layers else ""
        extra = "".join(f" {k}={v}" for k, v in self.overrides)
        method = t.method.value + (f"-r{t.lora_rank}" if t.method.value != "full" else "")
        return (f"{self.model}{shrunk}{extra} {t.precision.value} {method} {t.attention.value} "
                f"{p.recompute.name.lower()} mb{p.micro_batch} s{self.seq_len} tp{p.tp}")

    def config_path(self, folder: Path) -> str:
        """The model argument both sides accept: the catalog name, or a written shrunk config."""
        if not self.layers and not self.overrides:
            return self.model
        cfg = dict(catalog.model_config(self.model))
        for key in ("num_hidden_layers", "n_layer", "num_layers"):
            if key in cfg and self.layers:
                cfg[key] = self.layers
        cfg.update(dict(self.overrides))
        cfg["_name_or_path"] = self.label
        path = folder / f"{abs(hash(self.label))}.json"
        path.write_text(json.dumps(cfg))
        return str(path)


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    case: Case
    formula: MemoryEstimate
    traced: MemoryEstimate
    trace_seconds: float
    notes: tuple[str, ...] = field(default=())

    @property
    def peak_error(self) -> float:
        return (self.formula.allocated_bytes - self.traced.allocated_bytes) / self.traced.allocated_bytes

    def term_errors(self) -> dict[str, float]:
        """Relative error per term (0 when both are under the floor)."""
        errors = {}
        floor = TERM_FLOOR_OF_PEAK * self.traced.allocated_bytes
        for term in COMPARED_TERMS:
            a, b = self.formula.breakdown.get(term, 0), self.traced.breakdown.get(term, 0)
            errors[term] = 0.0 if abs(a - b) <= floor else (a - b) / max(b, 1)
        return errors

    @property
    def ok(self) -> bool:
        return abs(self.peak_error) <= PEAK_TOLERANCE and all(
            abs(e) <= TERM_TOLERANCE for e in self.term_errors().values())


def compare(case: Case) -> Comparison:
    from frenzy.memory.trace import trace_step  # needs torch: imported only when tracing

    with tempfile.TemporaryDirectory() as folder:
        model = case.config_path(Path(folder))
        arch = load_model(model)
        job = JobSpec(model=arch, training=case.training, seq_len=case.seq_len,
                      global_batch=case.plan.global_batch)
        formula = estimate(job, case.plan)
        traced = trace_step(model, case.training, case.plan, case.seq_len)
    return Comparison(case=case, formula=formula, traced=traced.estimate, trace_seconds=traced.trace_seconds,
                      notes=traced.notes)

"""Published peak-memory measurements (../shared/memory/published_measurements_dev.csv) expressed
as Frenzy jobs and plans, so MARP and other estimators can be scored against them.

Each row either maps to (job, plan, metric, unit) or carries the reason it cannot be expressed.
The metric decides which MARP figure is compared: `max_memory_allocated` and "active" peaks compare
with allocated bytes, `max_memory_reserved` with reserved, nvidia-smi with device bytes.
"""

from __future__ import annotations

import csv
import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

from frenzy.core import cuda_oom
from frenzy.core.errors import FrenzyError
from frenzy.core.hf_config import load_model
from frenzy.core.job import JobSpec
from frenzy.core.plan import ParallelPlan
from frenzy.core.training import Attention, Method, Optimizer, Precision, Recompute, TrainingConfig, ZeroStage
from frenzy.core.units import GB, GiB
from frenzy.memory.result import MemoryEstimate

# Rows whose training loop differs from anything a plan can state, keyed by (model, measured value).
NOT_EXPRESSIBLE = {
    ("meta-llama/Llama-3.2-3B", "25.5"): "unpacked variable-length data: the peak depends on the length distribution",
    ("meta-llama/Llama-3.2-3B", "51.0"): "torch.compile fuses ops and changes which activations are saved",
    ("meta-llama/Llama-3.2-3B", "42.9"): "torch.compile on (and chunked cross-entropy)",
    ("meta-llama/Llama-3.2-3B", "24.9"): "torch.compile and chunked cross-entropy on",
    ("meta-llama/Llama-3.2-3B", "23.1"): "torch.compile, chunked cross-entropy and optimizer-in-backward on",
    ("meta-llama/Llama-3.2-3B", "21.8"): "activation offloading to CPU (and torch.compile)",
    ("meta-llama/Llama-3.2-3B", "17.6"): "activation offloading to CPU (and torch.compile)",
    ("meta-llama/Llama-3.2-3B", "8.5"): "activation offloading to CPU (and torch.compile)",
    ("meta-llama/Llama-3.2-3B", "4.6"): "activation offloading to CPU (and torch.compile)",
    ("meta-llama/Llama-3.1-8B", "18.9"): "recipe flags unstated (paged 8-bit AdamW, optimizer-in-backward, compile)",
    ("meta-llama/Llama-3.1-8B", "16.2"): "recipe flags unstated and torch.compile on",
    ("meta-llama/Llama-3.1-8B", "7.4"): "recipe flags unstated and torch.compile on",
    ("meta-llama/Llama-3.1-70B", "27.6"): "recipe flags unstated and torch.compile on",
    # LitGPT finetune/lora.py (commit 8641822) runs multi-GPU through Lightning 2.1 FSDP1. The measured
    # per-GPU peaks exceed the 1-GPU run (22.18 GB on 2 GPUs vs 21.3 GB on 1) although the weights are
    # sharded: that FSDP kept the frozen base weights unsharded through backward, which no ZeRO-3 plan does.
    ("meta-llama/Llama-2-7b-hf", "22.18"): "FSDP1 kept frozen LoRA base weights unsharded (peak above the 1-GPU run)",
    ("meta-llama/Llama-2-13b-hf", "35.57"): "FSDP1 kept frozen LoRA base weights unsharded (peak near the 1-GPU run)",
}
# LitGPT finetune/lora.py at commit 8641822: r=8 on query and value, lora_dropout=0.05, AdamW.
LITGPT_LORA_DROPOUT = 0.05
# LitGPT's own model code runs GELU as one fused op (F.gelu, approximate="tanh" for Phi) where HF's
# Phi composes `gelu_new` from Python ops; HF's name for the fused op is gelu_pytorch_tanh.
LITGPT_FUSED_GELU = {"gelu_new": "gelu_pytorch_tanh"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Measurement:
    row: dict
    job: JobSpec | None = None
    plan: ParallelPlan | None = None
    metric: str = "allocated"  # allocated | reserved | device
    unit_bytes: int = GiB
    approximate: bool = False  # variable-length data: compared at the longest sequence
    reason: str = ""  # why the row cannot be expressed

    @property
    def expressible(self) -> bool:
        return self.job is not None

    @property
    def measured_bytes(self) -> float:
        return float(self.row["measured_gb"]) * self.unit_bytes

    def predicted_bytes(self, estimate: MemoryEstimate) -> int:
        return {"allocated": estimate.allocated_bytes, "reserved": estimate.reserved_bytes,
                "device": estimate.device_bytes}[self.metric]

    @property
    def label(self) -> str:
        r = self.row
        return f"{r['model']} {r['method']} mb{r['micro_batch']} dp{r['dp']} z{r['zero_stage']} ({r['measured_gb']})"


def _metric_and_unit(notes: str) -> tuple[str, int]:
    unit = GB if re.search(r"UNIT=GB\b", notes) else GiB
    if "max_memory_reserved" in notes:
        return "reserved", unit
    if "nvidia-smi" in notes:
        return "device", unit
    return "allocated", unit


def _precision(text: str) -> Precision:
    return Precision.BF16 if text.startswith(("bf16-pure", "bf16-true")) else Precision.BF16_MIXED


def _seq_len(text: str) -> tuple[int, bool]:
    match = re.match(r"<=\s*(\d+)", text)
    if match:
        return int(match.group(1)), True
    return int(text), False


def _express(row: dict) -> Measurement:
    key = (row["model"], row["measured_gb"])
    if key in NOT_EXPRESSIBLE:
        return Measurement(row=row, reason=NOT_EXPRESSIBLE[key])
    if "enc-dec" in row["model"]:
        return Measurement(row=row, reason="encoder-decoder models are outside MARP's decoder-only scope")
    if "unstated" in (row["micro_batch"], row["precision"]):
        return Measurement(row=row, reason="batch size, sequence length and precision are not stated")
    if "offload" in row["notes"].lower() and "CPU" in row["notes"]:
        return Measurement(row=row, reason="CPU offload")
    try:
        seq, approximate = _seq_len(row["seq_len"])
        method = Method(row["method"])
        dropout = LITGPT_LORA_DROPOUT if "litgpt" in row["source"] else 0.0
        training = TrainingConfig(precision=_precision(row["precision"]), method=method, optimizer=Optimizer.ADAMW,
                                  attention=Attention.FLASH, lora_rank=8, lora_targets=("q", "v"),
                                  lora_dropout=dropout)
        recompute = Recompute.FULL if row["checkpointing"].startswith("full") else Recompute.NONE
        plan = ParallelPlan(dp=int(row["dp"]), tp=int(row["tp"]), pp=int(row["pp"]),
                            zero=ZeroStage(int(row["zero_stage"])), micro_batch=int(row["micro_batch"]),
                            recompute=recompute)
        arch = load_model(row["model"])
        if "litgpt" in row["source"]:
            arch = dataclasses.replace(arch, activation=LITGPT_FUSED_GELU.get(arch.activation, arch.activation))
        job = JobSpec(model=arch, training=training, seq_len=seq, global_batch=plan.global_batch)
    except (FrenzyError, ValueError) as exc:
        return Measurement(row=row, reason=f"cannot be stated as a job: {exc}")
    metric, unit = _metric_and_unit(row["notes"])
    return Measurement(row=row, job=job, plan=plan, metric=metric, unit_bytes=unit, approximate=approximate)


def load_measurements(path: Path) -> list[Measurement]:
    with path.open(newline="") as f:
        return [_express(row) for row in csv.DictReader(f)]


# ---- Frenzy's own GPU measurements (bench/gpu_memory.py) -----------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuRun:
    """One row of a bench/gpu_memory.py CSV: the configuration as a job and plan, and what the GPU
    measured (the peaks of the second step; `ran` is False when it ran out of memory)."""

    row: dict
    job: JobSpec
    plan: ParallelPlan

    @property
    def ran(self) -> bool:
        return self.row["status"] == "ok"

    @property
    def allocated(self) -> int:
        return int(self.row["max_memory_allocated"])

    @property
    def reserved(self) -> int:
        return int(self.row["max_memory_reserved"])

    @property
    def device(self) -> int:
        """NVML's memory of the process after the step (the driver's view, context included)."""
        return int(self.row["device_used_bytes"])

    @property
    def tokens_per_s(self) -> float:
        return float(self.row["tokens_per_s"] or 0)

    @property
    def demand_at_failure(self) -> int:
        """For a run that ran out of memory: what PyTorch held plus what it asked for when it
        failed (from CUDA's message), the least the step needed; 0 when that is not known."""
        held, asked = cuda_oom.held_bytes(self.row["error"]), cuda_oom.requested_bytes(self.row["error"])
        return 0 if self.ran or held is None or asked is None else held + asked

    @property
    def label(self) -> str:
        r = self.row
        method = r["method"] + (f"-r{r['lora_rank']}-{r['lora_targets']}" if r["method"] != "full" else "")
        return (f"{r['model'].split('/')[-1]} {r['precision']} {method} {r['optimizer']} rc-{r['recompute']} "
                f"{r['attention']} mb{r['micro_batch']}x{r['grad_accum']} s{r['seq_len']}")


def load_gpu_runs(path: Path) -> list[GpuRun]:
    runs = []
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            training = TrainingConfig(precision=Precision(row["precision"]), method=Method(row["method"]),
                                      optimizer=Optimizer(row["optimizer"]), attention=Attention(row["attention"]),
                                      lora_rank=int(row["lora_rank"]), lora_targets=tuple(row["lora_targets"].split(",")))
            plan = ParallelPlan(micro_batch=int(row["micro_batch"]), grad_accum=int(row["grad_accum"]),
                                tp=int(row["tp"]), recompute=Recompute.parse(row["recompute"]))
            job = JobSpec(model=load_model(row["model"]), training=training, seq_len=int(row["seq_len"]),
                          global_batch=plan.global_batch)
            runs.append(GpuRun(row=row, job=job, plan=plan))
    return runs

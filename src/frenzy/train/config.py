"""Everything a training worker needs, as plain JSON-able values (no torch import here: the
control plane builds it, Ray ships it, the worker reads it)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# The CUDA caching allocator setting every worker runs with (unless the operator sets their own):
# expandable segments grow a segment instead of carving a new one, so a large tensor finds room
# even when freed blocks are scattered. Measured on an H100 (tests/data/gpu_memory_h100*.csv):
# BLOOM-560m at micro-batch 4 ran out of memory asking for its 7.7 GiB fp32 logits beside 8.5 GiB
# of fragmented cache, and ran with expandable segments at the allocated peak MARP predicts. That
# keeps `required_bytes`, which decides whether a plan fits, the real criterion.
CUDA_ALLOCATOR_CONF = "expandable_segments:True"
ARTIFACTS = "artifacts"  # the folder, under a job's storage, that the API serves
MERGED = "merged"  # inside it, with merge_lora: the adapter folded into its base (a save_pretrained model)


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerConfig:
    job_id: str
    attempt: int
    model_name: str
    family: str
    hf_config: dict[str, Any] = field(hash=False)
    local_weights: str | None = None  # a local folder with weights (+ tokenizer); else random init
    # training settings
    method: str = "full"
    precision: str = "bf16-mixed"
    optimizer: str = "adamw"
    learning_rate: float = 3e-4
    lora_rank: int = 8
    lora_targets: tuple[str, ...] = ("q", "v")
    seq_len: int = 128
    global_batch: int = 8
    steps: int = 10
    dataset: str = "synthetic"
    data: dict[str, Any] | None = field(default=None, hash=False)  # frenzy.data.DataSpec as JSON; None: synthetic
    seed: int = 0
    lr_schedule: str = "constant"
    warmup_steps: int = 0
    weight_decay: float = 0.0
    max_grad_norm: float | None = 1.0
    eval_every: int | None = None
    merge_lora: bool = False
    export_every_checkpoint: bool = False
    request: dict[str, Any] = field(default_factory=dict, hash=False)  # as submitted: goes into frenzy_job.json
    plan: dict[str, Any] = field(default_factory=dict, hash=False)  # the chosen plan, for frenzy_job.json
    # the plan
    dp: int = 1
    tp: int = 1
    pp: int = 1  # pipeline stages on consecutive ranks (frenzy.train.pipeline)
    sequence_parallel: bool = False  # with tp > 1: norms and the stream between blocks sharded on the sequence
    zero: int = 0
    micro_batch: int = 1
    grad_accum: int = 1
    recompute: str = "none"
    mixed_precision: str = "autocast"  # core.plan.MixedPrecisionMode: "autocast" or "fsdp2-param"
    # where checkpoints go (shared by all attempts, so a re-planned job resumes)
    storage_path: str = ""
    checkpoint_every: int = 5
    # memory watch
    gpu_type: str = ""
    gpu_memory_bytes: int = 0  # capacity of the (possibly emulated) GPU
    predicted_peak_bytes: int = 0  # MARP's device bytes for this plan
    # MARP's CUDA context, kernels and workspaces: on a fake GPU, the one part of a card's need that a CPU
    # process cannot measure, added to the measured live tensor bytes when deciding out-of-memory
    runtime_overhead_bytes: int = 0
    fake_gpu: bool = True  # CPU workers emulating GPUs: the OOM test hook applies
    emulate_peak_factor: float = 1.0
    step_delay_s: float = 0.0  # fake mode: slow steps down so tests can act mid-run

    def __post_init__(self):
        if min(self.dp, self.tp, self.pp) < 1 or self.micro_batch * self.grad_accum * self.dp != self.global_batch:
            raise ValueError(f"plan dp{self.dp} x mb{self.micro_batch} x ga{self.grad_accum} does not give "
                             f"global batch {self.global_batch}")
        if self.pp > 1 and self.grad_accum < self.pp:
            raise ValueError(f"a 1F1B pipeline of {self.pp} stages needs at least {self.pp} micro-batches per step, "
                             f"not grad_accum {self.grad_accum}")
        if self.sequence_parallel and (self.tp < 2 or self.seq_len % self.tp):
            raise ValueError(f"sequence parallelism needs tp > 1 dividing seq_len, not tp {self.tp} "
                             f"with seq_len {self.seq_len}")

    @property
    def world_size(self) -> int:
        return self.dp * self.tp * self.pp

    @property
    def checkpoint_dir(self) -> Path:
        return Path(self.storage_path) / "checkpoints"

    @property
    def artifacts_dir(self) -> Path:
        """What the job hands back: a peft adapter or a save_pretrained model, and frenzy_job.json."""
        return Path(self.storage_path) / ARTIFACTS

    def to_json(self) -> dict:
        out = asdict(self)
        out["lora_targets"] = list(self.lora_targets)
        return out

    @classmethod
    def from_json(cls, data: dict) -> WorkerConfig:
        data = dict(data)
        data["lora_targets"] = tuple(data.get("lora_targets", ()))
        return cls(**data)

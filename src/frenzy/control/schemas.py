"""Pydantic models of the HTTP API (the only place pydantic is used). They document the API in
OpenAPI and convert to and from the domain values; validation that needs the model catalog or the
cluster happens in the domain (`JobRequest`, the planner), whose messages say what to change."""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator


class LimitsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_gpus: Optional[int] = Field(None, ge=1, description="never use more GPUs than this")
    gpu_types: list[str] = Field(default_factory=list, description="allowed GPU types; empty = any")
    max_attempts: int = Field(3, ge=1, le=20, description="attempts (OOM re-plans included) before failing")


class EmulationIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    peak_factor: float = Field(1.0, ge=0.1, le=10,
                               description="fake-GPU mode: emulated peak = MARP's prediction x this (tests OOM)")


class JobIn(BaseModel):
    """A training job: model and settings. There is no GPU count: Frenzy chooses it."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "model": "gpt2", "global_batch": 8, "seq_len": 256, "steps": 20, "method": "lora"}]})
    model: Optional[str] = Field(None, description="catalog name (e.g. Qwen/Qwen2.5-0.5B) or a local config path")
    hf_config: Optional[dict[str, Any]] = Field(None, description="an inline Hugging Face config.json")
    name: str = ""
    global_batch: int = Field(8, ge=1, description="sequences per optimizer step")
    seq_len: int = Field(512, ge=1, description="tokens per sequence")
    steps: Optional[int] = Field(None, ge=1, description="optimizer steps (default 10)")
    tokens: Optional[int] = Field(None, ge=1, description="alternatively: tokens to train on")
    micro_batch: Optional[int] = Field(None, ge=1, description="optional cap on sequences per GPU per forward")
    precision: str = Field("bf16-mixed", description="fp32 | fp16-mixed | bf16-mixed | bf16")
    method: str = Field("full", description="full | lora | qlora")
    optimizer: str = Field("adamw", description="adamw | adamw-fused | adamw-8bit | sgd")
    learning_rate: float = 3e-4
    lora_rank: int = Field(8, ge=1)
    lora_targets: list[str] = Field(default_factory=lambda: ["q", "v"])
    dataset: str = Field("synthetic", description="'synthetic' or a local .jsonl / .json / .parquet / .csv / .txt "
                                                  "file (docs/DATA.md)")
    data_format: Literal["auto", "text", "prompt-completion", "chat"] = "auto"
    validation: Optional[Union[float, str]] = Field(
        None, description="held-out fraction of the rows in (0, 0.5], or a second local file; none: no eval loss")
    overlong: Literal["truncate", "drop"] = Field("truncate", description="rows longer than seq_len")
    epochs: Optional[float] = Field(None, gt=0, le=1000, description="alternatively: passes over the training data")
    lr_schedule: Literal["constant", "linear", "cosine"] = "constant"
    warmup_steps: int = Field(0, ge=0, description="linear warmup from 0 to learning_rate")
    weight_decay: float = Field(0.0, ge=0, lt=1, description="AdamW decoupled decay of matrices (not biases, norms)")
    max_grad_norm: Optional[float] = Field(1.0, gt=0, description="clip the global gradient norm; null: no clipping")
    seed: int = Field(0, ge=0, description="random-init weights, data order, validation split")
    eval_every: Optional[int] = Field(None, ge=1, description="validation loss every N steps (always at the end)")
    merge_lora: bool = Field(False, description="LoRA with local base weights: also export the merged model")
    export_every_checkpoint: bool = Field(False, description="refresh the artifacts at every checkpoint (a "
                                                             "usable model while the job runs), not only at the end")
    objective: Literal["time", "cost"] = "time"
    priority: int = 0
    limits: LimitsIn = Field(default_factory=LimitsIn)
    emulation: EmulationIn = Field(default_factory=EmulationIn)

    @field_validator("epochs", "validation", "weight_decay", "max_grad_norm", "warmup_steps", "eval_every", "seed",
                     mode="before")
    @classmethod
    def _no_booleans(cls, value):
        if isinstance(value, bool):  # JSON true is not a number of epochs, a fraction or a norm
            raise ValueError("a number is expected here, not true/false")
        return value

    def to_domain_json(self) -> dict:
        return self.model_dump(exclude_none=False)


class JobCreated(BaseModel):
    id: str
    state: str
    plans: list[dict[str, Any]] = Field(description="ranked plans against the live cluster at submission")


class JobSummary(BaseModel):
    id: str
    name: str
    state: str
    priority: int
    gpu_type: Optional[str]
    num_gpus: Optional[int]
    plan: Optional[str]
    attempts: int
    step: Optional[int]
    total_steps: Optional[int]
    loss: Optional[float]
    eval_loss: Optional[float] = Field(None, description="the latest validation loss, when the job has a validation set")
    at_risk: bool
    submitted_at: float
    owner: str = Field("local", description="the user who submitted it (an admin sees everyone's jobs)")


class AttemptOut(BaseModel):
    number: int
    outcome: str
    gpu_type: str
    plan: str
    allocation: list[tuple[str, int]]
    predicted_device_bytes: int
    observed_peak_bytes: list[int] = Field(description="per rank")
    observed_source: str = Field(description="cuda (max_memory_reserved), measured-cpu (a fake GPU's live tensor "
                                             "bytes) or oom-error (the need an out-of-memory error reported)")
    predicted_comparable_bytes: int = Field(description="MARP's figure for what the source measures: device bytes "
                                                        "for cuda, allocated bytes for measured-cpu")
    observed_over_predicted: Optional[float] = Field(description="largest observed peak / predicted_comparable_bytes")
    started_at: float
    ended_at: Optional[float]
    error: str


class JobDetail(JobSummary):
    request: dict[str, Any]
    chosen_plan: Optional[dict[str, Any]] = Field(description="plan, predicted memory breakdown, headroom")
    placement: list[tuple[str, int]]
    plans: list[dict[str, Any]]
    attempts_detail: list[AttemptOut]
    progress: dict[str, Any]
    failure_reason: str
    calibration_factor: Optional[float]
    timings: dict[str, Optional[float]]


class LogLine(BaseModel):
    seq: int
    ts: float
    line: str


class LogsOut(BaseModel):
    job_id: str
    lines: list[LogLine]
    next_after: int = Field(description="pass as ?after= to get only newer lines")
    finished: bool


class NodeOut(BaseModel):
    name: str
    gpu_type: str
    gpu_memory_bytes: int
    total_gpus: int
    used_gpus: int
    free_gpus: int
    alive: bool


class ClusterOut(BaseModel):
    nodes: list[NodeOut]
    gpu_types: dict[str, dict[str, int]] = Field(description="type -> total / used / free GPUs")


class PlansOut(BaseModel):
    model: str
    params: int
    model_source: str = Field(description="formula: the family's own formulas; profiled: a traced per-layer "
                                          "profile (families without a formula)")
    plans: list[dict[str, Any]]


class ArtifactFile(BaseModel):
    path: str = Field(description="relative to the job's artifact folder; GET /v1/jobs/{id}/artifacts/{path}")
    bytes: int


class ArtifactsOut(BaseModel):
    job_id: str
    state: str
    ready: bool = Field(description="true once frenzy_job.json is written: every file is complete")
    files: list[ArtifactFile]
    total_bytes: int


class ErrorOut(BaseModel):
    detail: str

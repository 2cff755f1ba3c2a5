"""Pydantic models of the HTTP API (the only place pydantic is used). They document the API in
OpenAPI and convert to and from the domain values; validation that needs the model catalog or the
cluster happens in the domain (`JobRequest`, the planner), whose messages say what to change."""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from frenzy.control import request as r

# A name is printable text of at most MAX_NAME_CHARS characters: no NUL (PostgreSQL refuses it in
# text), no control character a terminal would interpret (C0, DEL and the C1 range, whose 0x9b starts
# an escape sequence on some terminals), and no bidirectional override or isolate, which would make
# `frenzy jobs` show a name other than the one stored. Lone surrogates are refused by pydantic.
PRINTABLE = r"^[^\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]*$"
NAME_PATTERN = PRINTABLE
MAX_LIST_ITEMS = 64
MAX_CONFIG_DEPTH = 32  # real HF configs nest 3 levels (rope_scaling, quantization_config, text_config)


class StrictIn(BaseModel):
    """Request models: unknown fields refused, and JSON true/false never taken as a number."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_booleans(cls, value, info: ValidationInfo):
        if isinstance(value, bool) and cls.model_fields[info.field_name].annotation not in (bool, Optional[bool]):
            raise ValueError("a number or text is expected here, not true/false")
        return value


Text = Field(max_length=r.MAX_PATH_CHARS, pattern=PRINTABLE)


class LimitsIn(StrictIn):
    max_gpus: Optional[int] = Field(None, ge=1, le=r.MAX_GPUS, description=f"never use more GPUs than this "
                                    f"(at most {r.MAX_GPUS:,})")
    gpu_types: list[str] = Field(default_factory=list, max_length=MAX_LIST_ITEMS,
                                 description="allowed GPU types; empty = any")
    max_attempts: int = Field(3, ge=1, le=20, description="attempts (OOM re-plans included) before failing")

    @field_validator("gpu_types")
    @classmethod
    def _short_names(cls, value: list[str]) -> list[str]:
        return _check_items(value, "gpu_types")


class EmulationIn(StrictIn):
    peak_factor: float = Field(1.0, ge=0.1, le=10,
                               description="fake-GPU mode: emulated peak = MARP's prediction x this (tests OOM)")


class JobIn(StrictIn):
    """A training job: model and settings. There is no GPU count: Frenzy chooses it. Every number has
    the bounds its description gives (docs/SERVING.md, "Inputs and limits", says why)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, json_schema_extra={"examples": [{
        "model": "gpt2", "global_batch": 8, "seq_len": 256, "steps": 20, "method": "lora"}]})
    model: Optional[str] = Field(None, min_length=1, max_length=r.MAX_PATH_CHARS, pattern=PRINTABLE,
                                 description="catalog name (e.g. Qwen/Qwen2.5-0.5B), a repo id in the server's "
                                             "Hugging Face cache, or a config.json / model folder under the "
                                             "server's data roots")
    hf_config: Optional[dict[str, Any]] = Field(None, description="an inline Hugging Face config.json")
    name: str = Field("", max_length=r.MAX_NAME_CHARS, pattern=NAME_PATTERN,
                      description=f"at most {r.MAX_NAME_CHARS} printable characters (default: from the model)")
    global_batch: int = Field(8, ge=1, le=r.MAX_GLOBAL_BATCH,
                              description=f"sequences per optimizer step, 1..{r.MAX_GLOBAL_BATCH:,}")
    seq_len: int = Field(512, ge=1, le=r.MAX_SEQ_LEN, description=f"tokens per sequence, 1..{r.MAX_SEQ_LEN:,}")
    steps: Optional[int] = Field(None, ge=1, le=r.MAX_STEPS,
                                 description=f"optimizer steps, 1..{r.MAX_STEPS:,} (default 10)")
    tokens: Optional[int] = Field(None, ge=1, le=r.MAX_TOKENS,
                                  description=f"alternatively: tokens to train on, 1..{r.MAX_TOKENS:.0e} (and at "
                                              f"most {r.MAX_STEPS:,} steps' worth)")
    micro_batch: Optional[int] = Field(None, ge=1, le=r.MAX_GLOBAL_BATCH,
                                       description="optional cap on sequences per GPU per forward; divides "
                                                   "global_batch")
    precision: str = Field("bf16-mixed", max_length=32, description="fp32 | fp16-mixed | bf16-mixed | bf16")
    method: str = Field("full", max_length=32, description="full | lora | qlora")
    optimizer: str = Field("adamw", max_length=32, description="adamw | adamw-fused | adamw-8bit | sgd")
    learning_rate: float = Field(3e-4, gt=0, lt=1, description="in (0, 1)")
    lora_rank: int = Field(8, ge=1, le=r.MAX_LORA_RANK, description=f"1..{r.MAX_LORA_RANK:,}")
    lora_targets: list[str] = Field(default_factory=lambda: ["q", "v"], min_length=1, max_length=MAX_LIST_ITEMS,
                                    description="modules LoRA adapts (q, k, v, o, gate, up, down, all-linear); "
                                                "at least one")
    dataset: str = Field("synthetic", min_length=1, max_length=r.MAX_PATH_CHARS, pattern=PRINTABLE,
                         description="'synthetic' or a .jsonl / .json / .parquet / .csv / .txt file under the "
                                     "server's data roots (docs/DATA.md)")
    data_format: Literal["auto", "text", "prompt-completion", "chat"] = "auto"
    validation: Optional[Union[float, str]] = Field(
        None, description="held-out fraction of the rows in (0, 0.5], or a second data file under the data "
                          "roots; none: no eval loss")
    overlong: Literal["truncate", "drop"] = Field("truncate", description="rows longer than seq_len")
    epochs: Optional[float] = Field(None, gt=0, le=r.MAX_EPOCHS,
                                    description=f"alternatively: passes over the training data, (0, {r.MAX_EPOCHS}]")
    lr_schedule: Literal["constant", "linear", "cosine"] = "constant"
    warmup_steps: int = Field(0, ge=0, le=r.MAX_STEPS, description="linear warmup from 0 to learning_rate")
    weight_decay: float = Field(0.0, ge=0, lt=1, description="AdamW decoupled decay of matrices (not biases, norms)")
    max_grad_norm: Optional[float] = Field(1.0, gt=0, le=r.MAX_GRAD_NORM,
                                           description="clip the global gradient norm; null: no clipping")
    seed: int = Field(0, ge=0, le=r.MAX_SEED, description="random-init weights, data order, validation split "
                                                          f"(0..{r.MAX_SEED:,})")
    eval_every: Optional[int] = Field(None, ge=1, le=r.MAX_STEPS,
                                      description="validation loss every N steps (always at the end)")
    merge_lora: bool = Field(False, description="LoRA with local base weights: also export the merged model")
    export_every_checkpoint: bool = Field(False, description="refresh the artifacts at every checkpoint (a "
                                                             "usable model while the job runs), not only at the end")
    objective: Literal["time", "cost"] = "time"
    priority: int = Field(0, ge=r.MIN_PRIORITY, le=r.MAX_PRIORITY,
                          description="higher runs first; a 32-bit integer")
    limits: LimitsIn = Field(default_factory=LimitsIn)
    emulation: EmulationIn = Field(default_factory=EmulationIn)

    @field_validator("lora_targets")
    @classmethod
    def _short_targets(cls, value: list[str]) -> list[str]:
        return _check_items(value, "lora_targets")

    @field_validator("validation")
    @classmethod
    def _validation_path(cls, value):
        if isinstance(value, str):
            _check_text(value, "validation", r.MAX_PATH_CHARS)
        return value

    @field_validator("hf_config")
    @classmethod
    def _plain_config(cls, value):
        if value is not None:
            _check_config(value, 0)
        return value

    def to_domain_json(self) -> dict:
        return self.model_dump(exclude_none=False)


def _check_text(value: str, what: str, max_chars: int) -> None:
    if not value or len(value) > max_chars or not all(c.isprintable() for c in value):
        raise ValueError(f"{what} must be 1..{max_chars} printable characters")


def _check_items(values: list[str], what: str) -> list[str]:
    for value in values:
        _check_text(value, f"each of {what}", 64)
    return values


def _check_config(value: Any, depth: int) -> None:
    """An inline config is stored and echoed: strings without NUL or lone surrogates (which
    PostgreSQL refuses), nesting as shallow as real configs."""
    if depth > MAX_CONFIG_DEPTH:
        raise ValueError(f"hf_config nests deeper than {MAX_CONFIG_DEPTH} levels; pass a Hugging Face config.json")
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        for text in (key, item):
            if isinstance(text, str) and ("\0" in text or any("\ud800" <= c <= "\udfff" for c in text)):
                raise ValueError("hf_config holds a NUL character or an invalid code point; pass plain UTF-8 text")
        _check_config(item, depth + 1)


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
    teams: dict[str, dict[str, dict[str, int]]] = Field(
        default_factory=dict, description="team (\"(no team)\": the default pool) -> GPU type -> quota / used / "
                                          "borrowed GPUs (borrowed: used beyond the quota); empty without teams")


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


class ErrorItem(BaseModel):
    loc: list[Union[str, int]] = Field(description="where: e.g. [\"global_batch\"], [\"limits\", \"max_gpus\"], "
                                                   "[\"query\", \"seq_len\"]; [] for the request as a whole")
    msg: str


class TeamOut(BaseModel):
    """A team as the teams API answers (here, not beside its routes, so the client checks answers
    without importing FastAPI)."""
    name: str
    quota: dict[str, int] = Field(description="canonical GPU type -> nominal GPUs")
    members: list[str]


class ErrorOut(BaseModel):
    """Every 4xx answer: one sentence saying what to change, and the same per problem."""

    detail: str = Field(description="what is wrong and what to change, every problem in one line")
    errors: list[ErrorItem] = Field(default_factory=list, description="one entry per problem")

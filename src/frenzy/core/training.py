"""Training settings a user chooses: precision, method, optimizer, recomputation, attention kernel."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, IntEnum

from frenzy.core.hashing import fields_hash, reduce_by_fields


class Precision(Enum):
    """Numeric format of weights, gradients, optimizer state and compute.

    `*-mixed` keeps fp32 master weights and runs matmuls in 16 bits under autocast (PyTorch AMP);
    `bf16` is pure bf16 weights, gradients and optimizer state (torchtune / LitGPT "bf16-true").
    """

    FP32 = "fp32"
    FP16_MIXED = "fp16-mixed"
    BF16_MIXED = "bf16-mixed"
    BF16 = "bf16"

    @property
    def param_bytes(self) -> int:
        """Bytes per stored parameter (mixed precision stores fp32 parameters)."""
        return 2 if self is Precision.BF16 else 4

    @property
    def compute_bytes(self) -> int:
        """Bytes per element of matmul inputs/outputs."""
        return 4 if self is Precision.FP32 else 2

    @property
    def is_mixed(self) -> bool:
        return self in (Precision.FP16_MIXED, Precision.BF16_MIXED)

    @property
    def needs_bf16(self) -> bool:
        return self in (Precision.BF16, Precision.BF16_MIXED)

    @property
    def flops_key(self) -> str:
        """Which peak FLOP/s row of the GPU catalog the matmuls run at. fp32 runs true FP32: PyTorch
        leaves TF32 matmuls off by default (torch.backends.cuda.matmul.allow_tf32 = False) and the
        worker does not turn them on; measured on an H100, a Llama-3.2-1B fp32 step takes 4.1x the
        bf16-mixed one (tests/data/gpu_memory_h100.csv)."""
        return {"fp32": "fp32", "fp16-mixed": "fp16"}.get(self.value, "bf16")


class Method(Enum):
    FULL = "full"
    LORA = "lora"
    QLORA = "qlora"

    @property
    def freezes_base(self) -> bool:
        return self is not Method.FULL


class Optimizer(Enum):
    """AdamW variants differ in state dtype and in step-time temporaries (see memory.formulas)."""

    ADAMW = "adamw"  # torch.optim.AdamW, foreach implementation (CUDA default)
    ADAMW_FUSED = "adamw-fused"
    ADAMW_8BIT = "adamw-8bit"  # bitsandbytes AdamW8bit: two uint8 states + block-wise fp32 scales
    SGD = "sgd"  # SGD with momentum


class ZeroStage(IntEnum):
    """ZeRO stage: what data parallel ranks shard (1: optimizer state, 2: + gradients, 3: + weights).

    FSDP FULL_SHARD is stage 3, SHARD_GRAD_OP is stage 2.
    """

    NONE = 0
    OPTIMIZER = 1
    GRADIENTS = 2
    PARAMETERS = 3


class Recompute(IntEnum):
    """Activation recomputation, ordered by memory saved.

    SELECTIVE is PyTorch's selective activation checkpointing with the op policy of
    `frenzy.train.recompute` (per layer: the input, projection outputs and the fused attention
    kernel's outputs are kept). ATTENTION is Korthikanti et al. 2022's "selective": only eager
    attention's core (scores, softmax, dropout) is recomputed. It equals NONE under flash/SDPA,
    which never store scores, and is kept under its own name for the published measurements made
    with it; the worker does not run it."""

    NONE = 0
    ATTENTION = 1  # recompute eager attention's core only (Korthikanti et al. 2022)
    SELECTIVE = 2  # PyTorch SAC: keep projection and attention-kernel outputs, re-run the rest
    FULL = 3  # keep each layer's input only; HF gradient checkpointing

    @property
    def checkpoints_layers(self) -> bool:
        """Whether every decoder layer runs under torch.utils.checkpoint (full or selective): its
        inputs are kept and it is re-run in backward."""
        return self in (Recompute.SELECTIVE, Recompute.FULL)

    @classmethod
    def parse(cls, text: str) -> Recompute:
        return _parse_enum(cls, text, {m.name.lower(): m for m in cls})


class Attention(Enum):
    FLASH = "flash"  # flash-attention / SDPA flash kernel: no s x s matrix is stored
    SDPA = "sdpa"  # PyTorch SDPA on CUDA picks the flash or memory-efficient kernel
    EAGER = "eager"  # materialises scores and probabilities, b x heads x s x s

    @property
    def materialises_scores(self) -> bool:
        return self is Attention.EAGER


def recompute_warning(recompute: Recompute, attention: Attention) -> str | None:
    """Why a recomputation choice buys nothing, or None: Korthikanti's attention-only mode drops the
    attention scores, which flash/SDPA kernels never store."""
    if recompute is Recompute.ATTENTION and attention is not Attention.EAGER:
        return (f"recompute 'attention' equals 'none' under {attention.value} attention (the fused kernel "
                "never stores scores); use 'selective' (PyTorch selective checkpointing) or 'full'")
    return None


def _parse_enum(enum_cls, text, table):
    key = str(text).strip().lower()
    if key in table:
        return table[key]
    raise ValueError(f"unknown {enum_cls.__name__} '{text}'; choose one of: {', '.join(table)}")


def parse_choice(enum_cls, text: str):
    """Parse a CLI/API value into an Enum by its value, with a message listing the choices."""
    if enum_cls is Recompute:
        return Recompute.parse(text)
    if enum_cls is ZeroStage:
        return _parse_enum(enum_cls, text, {str(int(m)): m for m in enum_cls})
    return _parse_enum(enum_cls, text, {m.value: m for m in enum_cls})


ALL_LINEAR = "all-linear"


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingConfig:
    """How a model is trained, independent of how it is parallelised."""

    precision: Precision = Precision.BF16_MIXED
    method: Method = Method.FULL
    optimizer: Optimizer = Optimizer.ADAMW
    attention: Attention = Attention.FLASH
    lora_rank: int = 8
    lora_dropout: float = 0.0  # peft's default; LitGPT's scripts use 0.05
    # Normalised projection names: q, k, v, o, gate, up, down; or "all-linear".
    lora_targets: tuple[str, ...] = ("q", "v")
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        return self._hash  # frenzy.core.hashing

    def __reduce__(self):
        return reduce_by_fields(self)  # the stored hash is this process's: frenzy.core.hashing

    def __post_init__(self):
        object.__setattr__(self, "_hash", fields_hash(self))
        if self.lora_rank < 1:
            raise ValueError(f"lora_rank must be >= 1, got {self.lora_rank}")
        if not 0 <= self.lora_dropout < 1:
            raise ValueError(f"lora_dropout must be in [0, 1), got {self.lora_dropout}")
        allowed = {"q", "k", "v", "o", "gate", "up", "down", ALL_LINEAR}
        unknown = set(self.lora_targets) - allowed
        if unknown:
            raise ValueError(
                f"unknown LoRA target(s) {sorted(unknown)}; use any of q,k,v,o,gate,up,down or all-linear"
            )

    @property
    def trainable_targets(self) -> frozenset[str]:
        if ALL_LINEAR in self.lora_targets:
            return frozenset({"q", "k", "v", "o", "gate", "up", "down"})
        return frozenset(self.lora_targets)

"""Hugging Face accelerate's `accelerate estimate-memory` as a peak-memory predictor.

The command (accelerate/commands/estimate.py) builds the model on the meta device, measures
its fp32 size with `accelerate.utils.calculate_maximum_sizes`, and prints for each dtype a
"Training using Adam" figure: `max(estimate_training_usage(size, dtype).values())`. We do the
same offline: the config comes from the project's catalog instead of the Hub, and we call the
installed accelerate's own `calculate_maximum_sizes` and `estimate_training_usage`, so the
number is exactly what the command prints (before its human-readable rounding).

What the installed accelerate (1.x) computes, with S = fp32 size of the model:
  float32 row:              max(model S, grads S, optimizer 2S, step 4S)         = 4S (16 B/param)
  float16 / bfloat16 row:   accelerate's *mixed-precision* estimate
                            max(model S, grads 1.5S, optimizer 2S, step 2S)      = 2S  (8 B/param)
  int8 / int4 rows:         "N/A" for training.
It has no batch size, sequence length, activations, LoRA, ZeRO or parallelism input.

Mapping from a benchmark row (see describe()):
  fp32                     -> float32 row
  bf16-mixed / fp16-mixed  -> the 16-bit row, which accelerate itself labels mixed precision
                              (fp32 master weights + 16-bit compute); set MIXED_FIGURE = "float32"
                              to use the float32 row instead
  bf16 (pure)              -> the 16-bit row as well: the closest thing the command offers
                              (it has no pure-bf16 mode; `estimate_training_usage` treats
                              "float16" and "bfloat16" identically)
  lora / qlora             -> the same full-model figure: accelerate cannot express adapters or
                              4-bit bases (int4 prints N/A for training); a user gets this number
"""

from __future__ import annotations

import math

from . import _common

NAME = "accelerate estimate-memory"

# Which accelerate figure a *-mixed row is compared with: "mixed" = accelerate's own 16-bit
# (mixed-precision) training estimate, "float32" = its float32 row.
MIXED_FIGURE = "mixed"

try:
    import accelerate
    import transformers
    from accelerate.commands.estimate import estimate_training_usage
    from accelerate.utils import calculate_maximum_sizes

    AVAILABLE = True
    UNAVAILABLE_REASON = ""
except Exception as exc:  # noqa: BLE001 - any import failure makes the estimator unavailable
    AVAILABLE = False
    UNAVAILABLE_REASON = f"cannot import accelerate/transformers: {type(exc).__name__}: {exc}"

# How the size of the model was obtained, per repo_id (for the report).
SIZE_SOURCE: dict[str, str] = {}


def cli_auto_class(cfg: dict) -> str:
    """The class `accelerate estimate-memory` builds: AutoModel, unless the config's auto_map
    names an AutoModelFor* class (create_empty_model in accelerate/commands/estimate.py)."""
    auto_map = cfg.get("auto_map")
    if isinstance(auto_map, dict):
        for key in auto_map:
            if key.startswith("AutoModelFor"):
                return key
    return "AutoModel"


def model_size_bytes(row: dict) -> tuple[int, str]:
    """accelerate's total model size in fp32 bytes (parameters + buffers), and where it came from."""
    cfg = row["model_config"]
    auto_class = cli_auto_class(cfg)
    try:
        model = _common.meta_model(cfg, auto_class)
        total_size, _largest = calculate_maximum_sizes(model)
        return int(total_size), f"calculate_maximum_sizes({auto_class} on meta)"
    except Exception as exc:  # noqa: BLE001 - e.g. configs that need trust_remote_code
        # The command would download the remote code; offline we use the same arithmetic on
        # the known parameter count (fp32, 4 bytes each; buffers are not counted).
        return 4 * int(row["num_params"]), f"4 x num_params (meta build failed: {type(exc).__name__})"


def _accelerate_dtype(precision: str) -> str | None:
    if precision == "fp32":
        return "float32"
    if precision in ("bf16-mixed", "fp16-mixed"):
        if MIXED_FIGURE == "float32":
            return "float32"
        return "float16" if precision == "fp16-mixed" else "bfloat16"
    if precision == "bf16":
        return "bfloat16"
    if precision == "fp16":
        return "float16"
    return None


def predict(row: dict) -> int | None:
    if not AVAILABLE:
        return None
    dtype = _accelerate_dtype(row["precision"])
    if dtype is None:
        return None
    size, source = model_size_bytes(row)
    SIZE_SOURCE[row.get("repo_id", "?")] = source
    usage = estimate_training_usage(size, dtype)
    training = max(usage.values())
    if training == -1:  # accelerate prints "N/A"
        return None
    return int(math.ceil(training))


def describe() -> str:
    if not AVAILABLE:
        return f"{NAME}: not available ({UNAVAILABLE_REASON}); it predicts nothing."
    mixed = ("accelerate's own 16-bit figure, which it documents as mixed precision (fp32 master "
             "weights + 16-bit compute)" if MIXED_FIGURE == "mixed" else "its float32 figure")
    return (
        f"{NAME} (accelerate {accelerate.__version__}, transformers {transformers.__version__}): the "
        "'Training using Adam' column of `accelerate estimate-memory`, reproduced offline through its "
        "Python API. The model is built from the catalog config on the meta device with the class the "
        "command uses (AutoModel, or the AutoModelFor* class named in the config's auto_map), so an "
        "untied LM head is not counted, exactly as in the command; its fp32 size S (parameters + buffers) "
        "comes from accelerate.utils.calculate_maximum_sizes, and the training figure is "
        "max(accelerate.commands.estimate.estimate_training_usage(S, dtype).values()): 4S (16 B/param) "
        "for float32 and 2S (8 B/param) for its 16-bit mixed-precision estimate. fp32 rows use the "
        f"float32 figure, bf16-mixed/fp16-mixed rows use {mixed}, and pure-bf16 rows use the 16-bit "
        "figure too, since the command has no pure-bf16 mode. It models model states only, for one GPU: "
        "no activations (batch size and sequence length are ignored), no LoRA/QLoRA (those rows get the "
        "full-model figure, which is what a user of the command would see), no ZeRO/FSDP sharding and no "
        "tensor/pipeline parallelism. If transformers cannot build the architecture offline (configs that "
        "need trust_remote_code), S is taken as 4 x num_params."
    )

"""llm-analysis (github.com/cli99/llm-analysis, PyPI `llm-analysis`) as a peak-memory predictor.

llm-analysis 0.2.2 pins transformers<5 and huggingface-hub<0.15, which would break the project's
venv, so it is installed in its own venv and run through `_llm_analysis_runner.py` in a
subprocess:

    python3.11 -m venv .venv-llm-analysis && .venv-llm-analysis/bin/pip install llm-analysis==0.2.2
    printf '*\n' > .venv-llm-analysis/.gitignore   # keep it out of git (as Python 3.13 venvs do)

(override the interpreter with FRENZY_LLM_ANALYSIS_PYTHON). If `llm_analysis` is importable in
the current interpreter it is used in-process instead.

We call `LLMAnalysis(ModelConfig, GPUConfig, DtypeConfig, ParallelismConfig).training(...)` and
return its "(weight+op_state+grad+act)_memory_per_gpu": the per-GPU sum of weights, optimizer
state, gradients and activations of the first pipeline stage (`memory_left_per_gpu` is the GPU
capacity minus that sum, not a peak). How each row is stated is in describe() and below.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

from . import _common

NAME = "llm-analysis"

_HERE = Path(__file__).resolve().parent
_REPO = _HERE.parent.parent
RUNNER = _HERE / "_llm_analysis_runner.py"
VENV_PYTHON = Path(os.environ.get("FRENZY_LLM_ANALYSIS_PYTHON", _REPO / ".venv-llm-analysis" / "bin" / "python"))
RESULT_KEY = "(weight+op_state+grad+act)_memory_per_gpu"

# MLPs with a gate: llm-analysis models every MLP as two h x ffn matrices, so a gated MLP with
# intermediate size I (three h x I matrices) is stated with ffn_embed_dim = 1.5 * I, which keeps
# its parameter count (and gives 3*I saved MLP activations per token).
_GATED = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2",
          "gemma3", "gemma3_text", "phi3", "stablelm", "olmo", "olmo2", "qwen", "cohere", "internlm2", "deepseek"}

# An A100-SXM4-80GB (llm-analysis' a100-sxm-80gb.json) with its capacity raised: the capacity only
# enters `memory_left` and an assertion that the micro batch fits, which would otherwise stop the
# tool from reporting anything for configurations that do not fit on one 80 GB card.
_GPU = {
    "name": "a100-sxm-80gb (capacity check disabled)",
    "mem_per_GPU_in_GB": 1e9,
    "hbm_bandwidth_in_GB_per_sec": 2039,
    "intra_node_bandwidth_in_GB_per_sec": 300,
    "intra_node_min_message_latency": 8e-06,
    "peak_fp16_TFLOPS": 312,
    "peak_i8_TFLOPS": 624,
    "peak_i4_TFLOPS": 1248,
    "inter_node_bandwidth_in_GB_per_sec": 200,
}


def _get(cfg: dict, *names, default=None):
    for name in names:
        if cfg.get(name) is not None:
            return cfg[name]
    return default


def model_config(row: dict) -> dict | None:
    """llm-analysis ModelConfig fields from the HF config (None for encoder-decoder models)."""
    cfg = _common.clean_config(row["model_config"])
    if _common.is_encoder_decoder(cfg):
        return None
    model_type = cfg.get("model_type")
    hidden = int(_get(cfg, "hidden_size", "n_embd", "d_model", "n_embed"))
    n_head = int(_get(cfg, "num_attention_heads", "n_head", "num_heads", "n_heads"))
    num_layers = int(_get(cfg, "num_hidden_layers", "n_layer", "num_layers", "n_layers"))
    kv_heads = _get(cfg, "num_key_value_heads", "num_kv_heads")
    if kv_heads is None and cfg.get("multi_query"):
        kv_heads = 1
    moe_experts = int(_get(cfg, "num_local_experts", "num_experts", default=1))
    moe_top_k = int(_get(cfg, "num_experts_per_tok", default=1)) if moe_experts > 1 else 1
    if moe_experts > 1:
        inter = _get(cfg, "moe_intermediate_size", "intermediate_size")
    else:
        inter = _get(cfg, "intermediate_size", "ffn_dim", "n_inner", "d_ff", "ffn_hidden_size")
    if model_type in _GATED:
        if model_type == "qwen":  # Qwen(1) states intermediate_size as the sum of both gated halves
            inter = inter // 2
        ffn = 1.5 * inter
    else:
        ffn = inter if inter is not None else 4 * hidden
    ffn = int(ffn)
    max_pos = _get(cfg, "max_position_embeddings", "n_positions", "seq_length", default=0)
    return {
        "name": row.get("repo_id", "model").replace("/", "_"),
        "num_layers": num_layers,
        "n_head": n_head,
        "hidden_dim": hidden,
        "vocab_size": int(cfg["vocab_size"]),
        # the tool asserts seq_len <= max_seq_len; ALiBi models (BLOOM) state none
        "max_seq_len": max(int(max_pos), int(row["seq_len"])),
        "num_key_value_heads": int(kv_heads) if kv_heads is not None else None,
        "ffn_embed_dim": ffn,
        "expansion_ratio": ffn / hidden,  # given explicitly: the tool asserts ffn % hidden == 0 otherwise
        "model_type": model_type,
        "moe_num_experts": moe_experts,
        "moe_top_k": moe_top_k,
    }


def job(row: dict) -> dict | None:
    """The llm-analysis call for one row, or None if the tool cannot state it."""
    model = model_config(row)
    if model is None:
        return None
    precision, method, optimizer = row["precision"], row.get("method", "full"), row.get("optimizer", "adamw")
    if precision in ("bf16-mixed", "fp16-mixed"):
        bits, master = 16, 4
    elif precision in ("bf16", "fp16"):
        bits, master = 16, 2  # pure 16-bit: the "master" weights and the gradients are 16-bit
    else:  # fp32: the tool only accepts 4/8/16-bit weights and activations (assertion in
        return None  # LLMAnalysis.get_TFLOPS_per_gpu, which training() always calls)
    # other_op_bytes: optimizer state besides the master weights (None = the tool's Adam default,
    # 8 bytes of fp32 moments; it then counts 4 + 8 = 12 bytes regardless of `master`)
    if optimizer in ("adamw", "adamw-fused", "adam"):
        other_op = None if master == 4 else 2 * master
    elif optimizer in ("adamw-8bit", "paged-adamw-8bit"):
        other_op = 2
    elif optimizer == "sgd":
        other_op = master  # momentum
    else:
        return None
    weight_bits = 4 if method == "qlora" else bits  # the tool's w4a16e16: 4-bit base, 16-bit embedding
    dtype = {"name": f"w{weight_bits}a{bits}e{bits}", "weight_bits": weight_bits,
             "activation_bits": bits, "embedding_bits": bits}
    tp, pp, dp = int(row.get("tp", 1)), int(row.get("pp", 1)), int(row.get("dp", 1))
    recompute = {"none": 0, "selective": 1, "full": 2}.get(str(row.get("recompute", "none")).split("+")[0])
    if recompute is None:
        return None
    training = {
        "batch_size_per_gpu": int(row["micro_batch"]),
        "seq_len": int(row["seq_len"]),
        "activation_recomputation": recompute,
        "ds_zero": int(row.get("zero_stage", 0)),
        "master_weights_dtype_bytes": master,
        "other_op_bytes": other_op,
        "flash_attn": str(row.get("attention", "flash")).startswith(("flash", "sdpa")),
        "mlp_gated_linear_units": model["model_type"] in _GATED,
    }
    return {
        "model": model,
        "gpu": _GPU,
        "dtype": dtype,
        "parallelism": {"tp_size": tp, "pp_size": pp, "dp_size": dp, "sp_size": int(row.get("sp", tp))},
        "training": training,
    }


def _in_process() -> bool:
    try:
        import llm_analysis  # noqa: F401
    except Exception:  # noqa: BLE001
        return False
    return True


def _run(jobs: list[dict]) -> dict:
    if _in_process():
        sys.path.insert(0, str(_HERE))
        try:
            import _llm_analysis_runner
        finally:
            sys.path.remove(str(_HERE))
        return _llm_analysis_runner.run(jobs)
    proc = subprocess.run([str(VENV_PYTHON), "-I", str(RUNNER)], input=json.dumps({"jobs": jobs}),
                          capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"llm-analysis runner failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return json.loads(proc.stdout)


@functools.lru_cache(maxsize=1)
def _availability() -> tuple[bool, str, str]:
    """(available, version, reason)."""
    if not _in_process() and not VENV_PYTHON.exists():
        return False, "", (f"llm-analysis is not importable here and {VENV_PYTHON} does not exist "
                           "(python3.11 -m venv .venv-llm-analysis && .venv-llm-analysis/bin/pip install llm-analysis==0.2.2)")
    try:
        return True, _run([])["version"], ""
    except Exception as exc:  # noqa: BLE001
        return False, "", f"{type(exc).__name__}: {exc}"


AVAILABLE = _in_process() or VENV_PYTHON.exists()
UNAVAILABLE_REASON = "" if AVAILABLE else "llm-analysis not installed (no .venv-llm-analysis)"


@functools.lru_cache(maxsize=1024)
def _summary(job_json: str) -> dict:
    return _run([json.loads(job_json)])["results"][0]


def summary(row: dict) -> dict | None:
    """llm-analysis' whole training summary dict for the row (None if the row cannot be stated)."""
    j = job(row)
    if j is None or not _availability()[0]:
        return None
    return _summary(json.dumps(j, sort_keys=True))


def predict(row: dict) -> int | None:
    s = summary(row)
    if s is None or "error" in s:
        return None
    return int(round(s[RESULT_KEY]))


def describe() -> str:
    ok, version, reason = _availability()
    if not ok:
        return f"{NAME}: not available ({reason}); it predicts nothing."
    where = ("in-process" if _in_process() else
             f"in its own venv ({VENV_PYTHON.parent.parent.name}, it pins transformers<5) through a subprocess")
    return (
        f"{NAME} {version} (run {where}): the per-GPU '{RESULT_KEY}' of LLMAnalysis.training(), "
        "i.e. weights + optimizer state + gradients + activations of the first pipeline stage, for "
        "batch_size_per_gpu = micro_batch, seq_len, ds_zero = zero_stage, tp/pp/dp from the row (sp = tp, "
        "the tool's default) and activation_recomputation NONE or FULL. The ModelConfig comes from the HF "
        "config (layers, heads, kv heads, hidden, vocab; max_seq_len raised to seq_len where needed); the "
        "tool models every MLP as two h x ffn matrices, so gated (SwiGLU/GeGLU) MLPs are stated with "
        "ffn_embed_dim = 1.5 x intermediate_size to keep their parameter count. Its own limits remain: the "
        "output embedding is always treated as tied (an untied LM head's weights and states are not "
        "counted), head_dim is hidden/n_head, biases are ignored, flash attention is assumed (the tool's "
        "default), and encoder-decoder models are not expressible (None). Precision: fp32 is not "
        "expressible (None: the tool asserts that weight and activation bits are 4, 8 or 16); "
        "bf16/fp16-mixed = w16a16e16 with fp32 master weights and fp32 Adam (the tool's defaults: "
        "2 + 4 + 12 = 18 B/param of model states); pure bf16 = w16a16e16 with master_weights_dtype_bytes = 2 "
        "and other_op_bytes = 4 (bf16 moments) - the tool always counts a master copy besides the weights, "
        "so pure bf16 costs it 10 B/param. adamw-8bit: other_op_bytes = 2. It has no notion of LoRA: LoRA "
        "rows get the full-training figure and QLoRA rows the same with 4-bit weights (w4a16e16), which is "
        "what a user of the tool would get. The GPU is an A100-SXM-80GB with the capacity check disabled "
        "(the capacity does not change the estimate)."
    )

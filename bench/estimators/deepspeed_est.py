"""DeepSpeed's ZeRO model-states memory estimators as a peak-memory predictor.

Calls the installed DeepSpeed functions themselves (docs: "Memory Requirements"):
  deepspeed.runtime.zero.stage_1_and_2.estimate_zero2_model_states_mem_needs
      -> (cpu_bytes, gpu_bytes); without offload gpu = 2*P + 18*P/N  (DeepSpeed 0.19; older
         releases documented 4*P + 16*P/N)
  deepspeed.runtime.zero.stage3.estimate_zero3_model_states_mem_needs
      -> (cpu_bytes, gpu_bytes, largest_layer_bytes); without offload
         gpu = 4*largest_layer_params + 18*P/N
where P is the parameter count and N the number of GPUs that shard the states. They cover model
states only (fp16/bf16 weights, gradients, fp32 master weights and Adam moments) under DeepSpeed's
mixed-precision assumption: no activations, no precision or optimizer input, no LoRA.

Mapping from a benchmark row:
  zero_stage 3     -> ZeRO-3 function; largest_layer_params is found the way DeepSpeed's own
                      estimate_zero3_model_states_mem_needs_all_live does (the module with most
                      direct parameters) on the model built on the meta device
  zero_stage 0/1/2 -> ZeRO-2 function (DeepSpeed has no stage-0/1 estimator); for dp = 1 it gives
                      2P + 18P = 20 B/param
  N                -> dp (passed as num_gpus_per_node=dp, num_nodes=1; the GPU figure depends on
                      the product only)
  tp*pp > 1        -> P / (tp*pp) parameters per model-parallel rank (the estimator knows only DP)
  lora / qlora     -> P = num_params (total), as a user of the estimator would pass
  offload          -> optional row keys `offload_optimizer` / `offload_params` (default False)
"""

from __future__ import annotations

from . import _common

NAME = "DeepSpeed ZeRO estimator"

try:
    import deepspeed
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
    from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs

    AVAILABLE = True
    UNAVAILABLE_REASON = ""
except Exception as exc:  # noqa: BLE001 - any import failure makes the estimator unavailable
    AVAILABLE = False
    UNAVAILABLE_REASON = f"cannot import deepspeed's estimators: {type(exc).__name__}: {exc}"

# How largest_layer_params was obtained, per repo_id (for the report).
LARGEST_LAYER_SOURCE: dict[str, str] = {}


def largest_layer_params(row: dict) -> int:
    """DeepSpeed's model_to_params() largest layer: max over modules of their direct parameters."""
    cfg = row["model_config"]
    try:
        model = _common.meta_model(cfg, _common.training_auto_class(cfg))
        largest = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules())
        LARGEST_LAYER_SOURCE[row.get("repo_id", "?")] = "meta model"
        return int(largest)
    except Exception as exc:  # noqa: BLE001 - e.g. configs that need trust_remote_code
        # In decoder LLMs the largest single module is the (input or output) embedding.
        c = _common.clean_config(cfg)
        hidden = c.get("hidden_size") or c.get("n_embd") or c.get("d_model")
        LARGEST_LAYER_SOURCE[row.get("repo_id", "?")] = f"vocab x hidden (meta build failed: {type(exc).__name__})"
        return int(c["vocab_size"]) * int(hidden)


def predict(row: dict) -> int | None:
    if not AVAILABLE:
        return None
    mp = int(row.get("tp", 1)) * int(row.get("pp", 1))
    params = int(row["num_params"]) // mp
    dp = int(row.get("dp", 1))
    offload_optimizer = bool(row.get("offload_optimizer", False))
    offload_params = bool(row.get("offload_params", False))
    if int(row.get("zero_stage", 0)) == 3:
        largest = largest_layer_params(row) // int(row.get("tp", 1))
        _cpu, gpu, _largest_mem = estimate_zero3_model_states_mem_needs(
            total_params=params,
            largest_layer_params=largest,
            num_gpus_per_node=dp,
            num_nodes=1,
            cpu_offload=offload_optimizer,
            cpu_offload_params=offload_params,
        )
    else:
        _cpu, gpu = estimate_zero2_model_states_mem_needs(
            total_params=params, num_gpus_per_node=dp, num_nodes=1, cpu_offload=offload_optimizer
        )
    return int(gpu)


def describe() -> str:
    if not AVAILABLE:
        return f"{NAME}: not available ({UNAVAILABLE_REASON}); it predicts nothing."
    return (
        f"{NAME} (deepspeed {deepspeed.__version__}, installed from PyPI with DS_BUILD_OPS=0; the "
        "functions are pure arithmetic and run on CPU): the GPU figure of DeepSpeed's own "
        "estimate_zero2_model_states_mem_needs (2P + 18P/N bytes without offload in this release) for "
        "zero_stage 0, 1 and 2 - DeepSpeed has no stage-0/1 estimator, so those rows use the ZeRO-2 "
        "formula - and of estimate_zero3_model_states_mem_needs (4 x largest-layer params + 18P/N) for "
        "zero_stage 3, with N = dp and P = num_params / (tp x pp). The largest layer is found as "
        "DeepSpeed's estimate_zero3_model_states_mem_needs_all_live does (the module with the most direct "
        "parameters, usually the embedding) on the model built from the catalog config on the meta device. "
        "It models model states only under DeepSpeed's fp16/bf16 mixed-precision Adam assumption: no "
        "activations (batch size and sequence length are ignored), the same figure for every precision and "
        "optimizer, and no LoRA/QLoRA - those rows pass the total parameter count, as a user of the "
        "estimator would. No CPU offload unless the row says so (offload_optimizer / offload_params)."
    )

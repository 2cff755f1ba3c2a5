"""Build the job's Hugging Face model and apply the plan: recomputation (`train.recompute`), LoRA, tensor (and
sequence) parallel (`train.tensor_parallel`), then DDP or FSDP2 over the data-parallel ranks."""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from frenzy.core.generic import text_config
from frenzy.train.config import WorkerConfig
from frenzy.train.layers import decoder_layers
from frenzy.train.recompute import enable_recompute
from frenzy.train.unused import freeze_unused

def build_model(cfg: WorkerConfig) -> nn.Module:
    """From the job's config: local weights if the spec points to a folder with weights, else a
    seeded random initialisation; then recomputation and LoRA as the plan says."""
    from frenzy.core.hf_cache import has_local_weights

    folder = cfg.local_weights if cfg.local_weights and has_local_weights(Path(cfg.local_weights)) else None
    dtype = torch.bfloat16 if cfg.precision == "bf16" else torch.float32
    model = build_base(cfg.hf_config, cfg.seed, folder, dtype)
    enable_recompute(model, cfg.recompute)  # per decoder layer: full, or selective (SAC's op policy)
    if cfg.method in ("lora", "qlora"):
        if cfg.dp == 1 or cfg.zero == 0:  # FSDP2 shards a unit's parameters in one dtype: its plans keep fp32
            model = model.to(frozen_base_dtype(cfg.precision))
        model = _lora(model, cfg)
    freeze_unused(model)  # what a text step never reads (a multimodal model's encoders): DDP would wait for it
    return model


def frozen_base_dtype(precision: str) -> torch.dtype:
    """The dtype a LoRA job's frozen base is kept in: the compute dtype of a 16-bit precision (the base
    is never updated, so fp32 masters would only double its bytes and add autocast's cast copies),
    fp32 for fp32 training; the adapters stay in fp32 (peft's autocast_adapter_dtype). MARP and the
    tracer count this. The random initialisation is drawn in fp32 first and cast, so a reload that
    rebuilds the base the same way gets the same weights."""
    return {"bf16": torch.bfloat16, "bf16-mixed": torch.bfloat16, "fp16-mixed": torch.float16}.get(
        precision, torch.float32)


def build_base(hf_config: dict, seed: int, weights_folder: str | None = None,
               dtype: torch.dtype = torch.float32) -> nn.Module:
    """The model before any adapter: the folder's weights, or the config's random initialisation
    under `seed` (every rank, and anyone reloading a job's adapter, builds the same weights)."""
    from frenzy.memory.trace.build import causal_lm_class, config_for_model

    # a multimodal config trains its language model (Gemma 3, Llama 4: text_config), as MARP plans it
    raw = {k: v for k, v in text_config(hf_config).items() if k not in ("architectures", "_name_or_path", "auto_map")}
    model_type = raw.pop("model_type")
    config = config_for_model(model_type, raw)
    config._attn_implementation = "sdpa"
    model = causal_lm_class(config)  # as the tracer builds it (Emu3's text model has no auto mapping)
    if weights_folder:
        return model.from_pretrained(weights_folder, config=config, local_files_only=True, dtype=dtype)
    torch.manual_seed(seed)
    return model._from_config(config, dtype=dtype)


def _lora(model: nn.Module, cfg: WorkerConfig) -> nn.Module:
    """Adapters on the projections MARP counts: the same module names the tracer adapts."""
    from peft import LoraConfig, get_peft_model

    from frenzy.core.training import ALL_LINEAR, TrainingConfig
    from frenzy.memory.trace.build import lora_modules, projections_only

    named = tuple(cfg.lora_targets) or (ALL_LINEAR,)  # none named: every projection, as before
    targets = TrainingConfig(lora_targets=named).trainable_targets
    modules = lora_modules(model, model.config.model_type, targets)
    with projections_only():
        return get_peft_model(model, LoraConfig(r=cfg.lora_rank, lora_alpha=2 * cfg.lora_rank, lora_dropout=0.0,
                                                target_modules=modules, task_type="CAUSAL_LM",
                                                fan_in_fan_out=model.config.model_type == "gpt2"))


def device_mesh(cfg: WorkerConfig, device: str) -> DeviceMesh:
    """(dp, tp) mesh; tp is the inner dimension, so a tensor-parallel group is consecutive ranks,
    which the executor places on one node."""
    return init_device_mesh(device, (cfg.dp, cfg.tp), mesh_dim_names=("dp", "tp"))


def apply_tensor_parallel(model: nn.Module, mesh: DeviceMesh, cfg: WorkerConfig) -> None:
    """The family's Megatron-style split (frenzy.core.tensor_parallel.TP_RULES), with sequence
    parallelism when the plan asks for it: frenzy.train.tensor_parallel."""
    from frenzy.train.tensor_parallel import parallelize

    parallelize(model, mesh, cfg.family, cfg.sequence_parallel)


def fsdp_param_dtype(cfg: WorkerConfig) -> bool:
    """Whether the plan runs FSDP2's MixedPrecisionPolicy (MixedPrecisionMode.FSDP2_PARAM): bf16
    all-gathered parameters over fp32 sharded masters, no autocast."""
    from frenzy.core.plan import MixedPrecisionMode

    return MixedPrecisionMode.parse(cfg.mixed_precision) is MixedPrecisionMode.FSDP2_PARAM


def wrap_data_parallel(model: nn.Module, cfg: WorkerConfig, mesh: DeviceMesh, device: torch.device) -> nn.Module:
    """ZeRO 0 -> DDP (everything replicated); ZeRO >= 1 -> FSDP2 with each decoder layer and the root
    as units, so the stored weights, their gradients (reduce-scattered) and the optimizer state built
    on them are 1/dp shards at every stage: ZeRO-1 runs as ZeRO-2. ZeRO 1/2 keep a unit's gathered
    weights from its forward to its backward (reshard_after_forward=False); ZeRO 3 reshards them
    after each forward. With tensor parallelism the dp shards are 2-D (FSDP2 + TP).
    In the fsdp2-param mode, which the planner gives every bf16-mixed ZeRO-1/2 plan (DeepSpeed's bf16
    ZeRO-1/2: memory.zero), the gathered weights are bf16 over fp32 sharded masters and gradients
    are reduce-scattered in fp32 (MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32))."""
    if cfg.dp == 1:
        return model
    if cfg.zero == 0 and cfg.tp == 1:
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None,
                                       process_group=mesh["dp"].get_group())
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    if fsdp_param_dtype(cfg) and (cfg.precision != "bf16-mixed" or cfg.zero == 0):
        raise ValueError(f"the fsdp2-param mode needs bf16-mixed with ZeRO >= 1, not {cfg.precision} zero {cfg.zero}")
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) \
        if fsdp_param_dtype(cfg) else MixedPrecisionPolicy()
    reshard = cfg.zero >= 3
    for layer in decoder_layers(model):
        fully_shard(layer, mesh=mesh["dp"], reshard_after_forward=reshard, mp_policy=policy)
    fully_shard(model, mesh=mesh["dp"], reshard_after_forward=reshard, mp_policy=policy)
    return model


def compute_precision(cfg: WorkerConfig, device: torch.device):
    """The context a forward runs in: autocast for the *-mixed precisions over fp32 weights; none in
    the fsdp2-param mode, where FSDP2 hands the forward bf16 parameters."""
    return precision_context(cfg.precision, fsdp_param_dtype(cfg) and cfg.dp > 1, device)


def precision_context(precision: str, bf16_parameters: bool, device: torch.device):
    if bf16_parameters:
        return contextlib.nullcontext()
    if precision == "bf16-mixed":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    if precision == "fp16-mixed" and device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.float16)
    return contextlib.nullcontext()

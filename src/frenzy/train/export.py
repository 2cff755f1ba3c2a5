"""What a finished job hands back: a folder Hugging Face loads directly.

Full fine-tuning writes a `save_pretrained`-style safetensors model (config.json, generation_config.json,
model.safetensors or model-0000i-of-0000N.safetensors + model.safetensors.index.json); LoRA / QLoRA
write a peft adapter (adapter_config.json, adapter_model.safetensors). Tokenizer files of a local base
folder are copied beside either. The folder is assembled in a temporary sibling and renamed into
place, so a reader never sees half an artifact and a re-run replaces the old one.

Under FSDP2 or tensor parallelism the parameters are DTensor shards: `write_artifacts` is collective
and gathers one tensor at a time (`full_tensor()` on every rank), while rank 0 moves it to CPU into
the current shard and flushes the shard to disk once it reaches `max_shard_bytes`, so no rank ever
holds the whole model, and rank 0 holds about one shard of host memory beyond its training state
(nothing at all for an unsharded CPU model saved in its own dtype: the shard references the
parameters).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from frenzy.train.config import WorkerConfig

DEFAULT_MAX_SHARD_BYTES = 5 * 2**30
SAFE_WEIGHTS = "model.safetensors"
SAFE_INDEX = "model.safetensors.index.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
# Files a Hugging Face tokenizer is saved as (slow and fast, SentencePiece and BPE, chat templates).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                   "tokenizer.model", "spiece.model", "sentencepiece.bpe.model", "vocab.json", "merges.txt",
                   "vocab.txt", "chat_template.jinja", "chat_template.json")
# Wrapper prefixes that torch inserts into parameter names (activation checkpointing, torch.compile).
_WRAPPER_PREFIXES = ("_checkpoint_wrapped_module.", "_orig_mod.", "_fsdp_wrapped_module.")


def write_artifacts(model: nn.Module, cfg: WorkerConfig, out_dir: Path, *,
                    max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES) -> list[str]:
    """Write the trained model (full fine-tuning) or its adapter (LoRA / QLoRA) into out_dir.
    Call on every rank: the gathering is collective. Returns the written file names relative to
    out_dir on rank 0, [] on the other ranks."""
    if max_shard_bytes < 1:
        raise ValueError(f"max_shard_bytes must be positive, got {max_shard_bytes}")
    out_dir = Path(out_dir)
    rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
    staging = out_dir.parent / f".{out_dir.name}.partial-{uuid.uuid4().hex[:8]}"
    if rank == 0:
        staging.mkdir(parents=True)
    inner = _unwrap(model)
    _reshard(inner)
    try:
        if cfg.method in ("lora", "qlora"):
            files = _write_adapter(inner, cfg, staging, rank)
        else:
            files = _write_full(inner, cfg, staging, rank, max_shard_bytes)
        if rank == 0:
            files += copy_tokenizer_files(cfg.local_weights, staging)
            _publish(staging, out_dir)
    finally:
        if rank == 0 and staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    _barrier()
    return sorted(files) if rank == 0 else []


def merge_lora(adapter_dir: Path, base: str, out_dir: Path, *,
               max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES) -> list[str]:
    """Fold an adapter into its base weights: base (a local folder with weights) + adapter_dir ->
    a plain safetensors model in out_dir, with the base's tokenizer files. Returns the file names."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from frenzy.core.errors import InvalidConfigError
    from frenzy.memory.trace.build import projections_only

    base_dir = Path(base)
    if not _has_weights(base_dir):
        raise InvalidConfigError(
            f"merge_lora needs the base model's weights in a local folder, and '{base}' is not a folder with "
            f"config.json and *.safetensors / pytorch_model*.bin; download it first (e.g. `hf download {base} "
            f"--local-dir DIR`) and pass DIR as the base")
    out_dir = Path(out_dir)
    model = AutoModelForCausalLM.from_pretrained(base_dir, local_files_only=True, dtype="auto")
    with projections_only():  # the adapter targets what training targeted, as in model._lora
        model = PeftModel.from_pretrained(model, str(adapter_dir), local_files_only=True)
    merged = model.merge_and_unload()
    staging = out_dir.parent / f".{out_dir.name}.partial-{uuid.uuid4().hex[:8]}"
    try:
        merged.save_pretrained(staging, max_shard_size=max_shard_bytes, safe_serialization=True)
        _auto_loadable(merged.config, _hf_class(merged)).save_pretrained(staging)  # its loaded text config
        copy_tokenizer_files(str(base_dir), staging)
        files = sorted(str(p.relative_to(staging)) for p in staging.rglob("*") if p.is_file())
        _publish(staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return files


def copy_tokenizer_files(folder: str | None, out_dir: Path) -> list[str]:
    """Copy the tokenizer files a local model folder holds; anything else (no folder, a hub name,
    a folder without tokenizer files) copies nothing. Never downloads."""
    if not folder or not Path(folder).is_dir():
        return []
    copied = []
    for name in TOKENIZER_FILES:
        source = Path(folder) / name
        if source.is_file():
            shutil.copyfile(source, Path(out_dir) / name)
            copied.append(name)
    return copied


# ---------------------------------------------------------------- full fine-tuning


def _write_full(model: nn.Module, cfg: WorkerConfig, staging: Path, rank: int, max_shard_bytes: int) -> list[str]:
    dtype = master_dtype(cfg.precision)
    writer = ShardWriter(staging, max_shard_bytes) if rank == 0 else None
    for name, tensor in _stages(lambda leader: _full_tensors(model, dtype, 0 if leader else 1), cfg, rank):
        if writer is not None:
            writer.add(name, tensor)
    if writer is None:
        return []
    files = writer.close()
    _write_configs(model, dtype, staging)
    return files + [p.name for p in staging.glob("*.json") if p.name != SAFE_INDEX]


def master_dtype(precision: str) -> torch.dtype:
    """The dtype training keeps the weights in (model.build_model): bf16 for pure bf16, else fp32
    (the *-mixed precisions autocast over fp32 master weights)."""
    return torch.bfloat16 if precision == "bf16" else torch.float32


def _full_tensors(model: nn.Module, dtype: torch.dtype, rank: int) -> Iterator[tuple[str, torch.Tensor]]:
    """(Hugging Face key, full CPU tensor) one at a time. Every rank runs the gathers in the same
    (state-dict) order; only rank 0 receives the tensors. Tied aliases and keys transformers
    ignores on save are skipped; non-persistent buffers are not in the state dict to begin with."""
    state = model.state_dict(keep_vars=True)
    skip = _tied_aliases(model, state) | set(getattr(model, "_keys_to_ignore_on_save", None) or ())
    for key, value in state.items():
        if key in skip or not isinstance(value, torch.Tensor):
            continue
        full = _gather(value)
        if rank == 0:
            # On CPU in the saved dtype this is the live parameter itself, not a copy: the shard that
            # holds it is on disk before write_artifacts returns, and training has stopped.
            yield _clean_key(key), full.detach().to("cpu", dtype if full.is_floating_point() else full.dtype)
        del full


def _gather(value: torch.Tensor) -> torch.Tensor:
    """The whole tensor behind a DTensor shard (collective over its mesh); a plain tensor as it is."""
    from torch.distributed.tensor import DTensor

    return value.full_tensor() if isinstance(value, DTensor) else value


def _tied_aliases(model: nn.Module, state: dict) -> set[str]:
    """State-dict keys that are the same tensor as an earlier key, dropped as save_pretrained drops
    them: transformers' tied targets (lm_head.weight) go, their sources (the embedding) stay."""
    targets = set(getattr(model, "all_tied_weights_keys", None) or {})
    groups: dict[int, list[str]] = {}
    for key, value in state.items():
        groups.setdefault(id(value), []).append(key)
    drop = set()
    for keys in groups.values():
        if len(keys) > 1:
            keep = next((k for k in keys if _clean_key(k) not in targets), keys[0])
            drop.update(k for k in keys if k != keep)
    return drop


class ShardWriter:
    """Accumulates CPU tensors into a shard and writes it once the next tensor would pass
    max_shard_bytes (a single larger tensor gets a shard of its own), then names the shards
    model-0000i-of-0000N.safetensors with an index, or model.safetensors when one suffices."""

    def __init__(self, folder: Path, max_shard_bytes: int):
        self.folder, self.max_shard_bytes = folder, max_shard_bytes
        self.pending: dict[str, torch.Tensor] = {}
        self.pending_bytes = 0
        self.storages: set[int] = set()  # of the pending tensors
        self.peak_pending_bytes = 0
        self.shards: list[list[str]] = []
        self.total_bytes = 0

    def add(self, key: str, tensor: torch.Tensor) -> None:
        size = tensor.numel() * tensor.element_size()
        if self.pending and self.pending_bytes + size > self.max_shard_bytes:
            self._flush()
        # safetensors refuses tensors that share memory within a file (views of one buffer): copy those
        storage = tensor.untyped_storage().data_ptr()
        if not tensor.is_contiguous() or storage in self.storages:
            tensor = tensor.contiguous() if not tensor.is_contiguous() else tensor.clone()
        self.storages.add(tensor.untyped_storage().data_ptr())
        self.pending[key] = tensor
        self.pending_bytes += size
        self.total_bytes += size
        self.peak_pending_bytes = max(self.peak_pending_bytes, self.pending_bytes)

    def _flush(self) -> None:
        from safetensors.torch import save_file

        save_file(self.pending, self.folder / self._partial(len(self.shards)), metadata={"format": "pt"})
        self.shards.append(list(self.pending))
        self.pending, self.pending_bytes, self.storages = {}, 0, set()

    @staticmethod
    def _partial(index: int) -> str:
        return f"shard-{index:05d}.partial"

    def close(self) -> list[str]:
        if self.pending or not self.shards:
            self._flush()
        count = len(self.shards)
        if count == 1:
            os.replace(self.folder / self._partial(0), self.folder / SAFE_WEIGHTS)
            return [SAFE_WEIGHTS]
        names = [f"model-{i + 1:05d}-of-{count:05d}.safetensors" for i in range(count)]
        weight_map = {}
        for i, (name, keys) in enumerate(zip(names, self.shards, strict=True)):
            os.replace(self.folder / self._partial(i), self.folder / name)
            weight_map.update(dict.fromkeys(keys, name))
        index = {"metadata": {"total_size": self.total_bytes}, "weight_map": dict(sorted(weight_map.items()))}
        (self.folder / SAFE_INDEX).write_text(json.dumps(index, indent=2) + "\n")
        return names + [SAFE_INDEX]


def _write_configs(model: nn.Module, dtype: torch.dtype, staging: Path) -> None:
    """config.json (architectures = the transformers class under any FSDP2 subclass, dtype = the
    saved dtype) and generation_config.json when the model has one; the live config is untouched."""
    config = copy.deepcopy(model.config)
    config.architectures = [_hf_class(model).__name__]
    config.dtype = dtype
    _auto_loadable(config, _hf_class(model)).save_pretrained(staging)
    generation = getattr(model, "generation_config", None)
    can_generate = getattr(model, "can_generate", lambda: generation is not None)
    if generation is not None and can_generate():
        generation.save_pretrained(staging)


def _auto_loadable(config, model_class: type):
    """AutoModelForCausalLM picks a class by the config's model_type. The text model of Emu3 or Mllama
    (a multimodal config's text_config, what the worker trains) has a model_type no auto mapping
    names, while its multimodal model_type maps to this very class: its config is saved as that
    multimodal config's text_config, from which the class builds the same model."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    if config.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return config
    outer_type = next((t for t, name in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items()
                       if name == model_class.__name__ and t in CONFIG_MAPPING), None)
    if outer_type is None:
        return config
    outer = CONFIG_MAPPING[outer_type](text_config=config.to_dict())
    outer.architectures, outer.dtype = config.architectures, config.dtype
    return outer


def _hf_class(model: nn.Module) -> type:
    """fully_shard swaps a module's class for a generated FSDP<Name> subclass: skip torch's classes."""
    return next(c for c in type(model).__mro__ if not c.__module__.startswith("torch."))


# ---------------------------------------------------------------- LoRA / QLoRA


def _write_adapter(model: nn.Module, cfg: WorkerConfig, staging: Path, rank: int) -> list[str]:
    """The adapter as peft saves it: peft's own get_peft_model_state_dict picks and renames the
    keys (lora_A.default.weight -> lora_A.weight) from a state dict whose adapter tensors are
    gathered; the base weights are never gathered."""
    adapter = getattr(model, "active_adapter", "default")
    if not hasattr(model, "peft_config"):
        raise ValueError(f"method {cfg.method} expects a peft model, got {type(model).__name__}")
    weights = dict(_stages(lambda leader: _adapter_tensors(model, adapter, leader), cfg, rank))
    if rank != 0:
        return []
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in weights.items()}, staging / ADAPTER_WEIGHTS, metadata={"format": "pt"})
    config = copy.deepcopy(model.peft_config[adapter])
    config.inference_mode = True
    # where AutoPeftModelForCausalLM finds the base: the local folder trained from, else the hub name
    config.base_model_name_or_path = cfg.local_weights or cfg.model_name
    config.save_pretrained(str(staging))
    return [ADAPTER_WEIGHTS, "adapter_config.json"]


def _adapter_tensors(model: nn.Module, adapter: str, receiver: bool) -> Iterator[tuple[str, torch.Tensor]]:
    """(peft key, full CPU tensor) of the model's adapter tensors, yielded on the receiving rank (gathers
    are collective); peft's own get_peft_model_state_dict picks and renames them, from the modules
    this model holds (a pipeline stage: its own)."""
    from peft import get_peft_model_state_dict

    state = model.state_dict(keep_vars=True)
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    chosen = sorted(k for k, v in state.items() if isinstance(v, torch.Tensor)
                    and (k in trainable or ".lora_" in k or f".{adapter}." in k))
    gathered = {}
    for key in chosen:
        full = _gather(state[key])
        if receiver:
            gathered[_clean_key(key)] = full.detach().to("cpu").contiguous()
    if receiver:
        yield from get_peft_model_state_dict(model, state_dict=gathered, adapter_name=adapter).items()


# ---------------------------------------------------------------- plumbing


def _stages(stream, cfg: WorkerConfig, rank: int) -> Iterator[tuple[str, torch.Tensor]]:
    """`stream(receiver)` of this rank's model; under pipeline stages, every stage's on rank 0."""
    if cfg.pp > 1:
        from frenzy.train.pipeline import to_first_rank

        return to_first_rank(stream, cfg)
    return stream(rank == 0)


def _unwrap(model: nn.Module) -> nn.Module:
    """DDP's and torch.compile's wrappers hold the model; FSDP2 shards it in place."""
    while True:
        inner = getattr(model, "module", None) if isinstance(model, nn.parallel.DistributedDataParallel) else None
        inner = inner or getattr(model, "_orig_mod", None)
        if inner is None:
            return model
        model = inner


def _reshard(model: nn.Module) -> None:
    """ZeRO 1/2 keep FSDP2 parameters gathered after forward: put every module back on its shards,
    so the state dict holds DTensors (gathered below, one at a time)."""
    from torch.distributed.fsdp import FSDPModule

    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.reshard()


def _clean_key(key: str) -> str:
    for prefix in _WRAPPER_PREFIXES:
        key = key.replace(prefix, "")
    return key


def _has_weights(folder: Path) -> bool:
    if not folder.is_dir() or not (folder / "config.json").is_file():
        return False
    return any(folder.glob("*.safetensors")) or any(folder.glob("pytorch_model*.bin"))


def _publish(staging: Path, out_dir: Path) -> None:
    """Rename the finished folder into place; an older artifact is moved aside first, then removed."""
    old = None
    if out_dir.exists():
        old = out_dir.parent / f".{out_dir.name}.old-{uuid.uuid4().hex[:8]}"
        os.replace(out_dir, old)
    os.replace(staging, out_dir)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()

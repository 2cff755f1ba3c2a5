"""Where a Hugging Face causal LM keeps its decoder layers: the tracer profiles them, the worker
shards them as FSDP units and splits them for tensor parallelism, so all three read the same ones."""

from __future__ import annotations

from torch import nn


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The decoder layers of any HF causal LM (model.layers, transformer.h, transformer.blocks,
    gpt_neox.layers, decoder.layers): the ModuleList of `*Layer`/`*Block` modules as long as the
    text config's layer count, else the longest. A multimodal model's vision or audio encoder may
    hold more layers than its language model (Phi-4-multimodal's small configs, GIT's)."""
    stacks = [m for m in model.modules() if _is_layer_stack(m)]
    if not stacks:
        raise ValueError(f"{type(model).__name__}: no decoder layer list found")
    depth = _text_depth(model)
    return max(stacks, key=lambda stack: (len(stack) == depth, len(stack)))


def _is_layer_stack(module: nn.Module) -> bool:
    # the layers may be of several classes (Mllama's self- and cross-attention decoder layers)
    return isinstance(module, nn.ModuleList) and len(module) > 0 and all(
        "Layer" in type(m).__name__ or "Block" in type(m).__name__ for m in module)


def _text_depth(model: nn.Module) -> int | None:
    config = getattr(model, "config", None)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return getattr(text, "num_hidden_layers", None)

"""Parameters a text step never reads, frozen before the model is wrapped.

A multimodal checkpoint trained on text leaves parts of the model out of every step:
Phi-4-multimodal's vision and audio encoders, Mllama's cross-attention layers (they run only beside
an image). Their gradients are never made, so AdamW skips them and freezing them changes no update;
but DDP waits for a gradient of every parameter that requires one and fails on the second step
("Expected to have finished reduction in the prior iteration"), and reserves bucket memory for
them. One forward of a few tokens under no_grad, watching which parameters reach a torch call,
finds them whatever the family calls them. Within a decoder layer that ran nothing is frozen: the
experts a router leaves out of the probe's tokens are picked by others.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

from frenzy.train.layers import decoder_layers

PROBE_TOKENS = 8


class _ParametersRead(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.read: set[int] = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.read.update(id(t) for t in tree_leaves((args, kwargs)) if isinstance(t, nn.Parameter))
        return func(*args, **kwargs)


def freeze_unused(model: nn.Module) -> list[str]:
    """Freeze the trainable parameters a forward over token ids never reads; their names."""
    try:
        unused = unused_parameters(model)
    except Exception:  # noqa: BLE001 - a model that needs more than token ids: the step itself says so
        return []
    for _, parameter in unused:
        parameter.requires_grad_(False)
    return [name for name, _ in unused]


def unused_parameters(model: nn.Module) -> list[tuple[str, nn.Parameter]]:
    """(name, parameter) of the trainable parameters a forward over token ids never reads (on fake
    tensors too: MARP counts them as the worker keeps them, without gradients or optimizer state)."""
    vocab = model.get_input_embeddings().num_embeddings
    ids = torch.arange(PROBE_TOKENS).remainder(vocab).unsqueeze(0)
    watch = _ParametersRead()
    with torch.no_grad(), watch:
        model(input_ids=ids.to(next(model.parameters()).device))
    # a layer that ran keeps all its parameters: which experts a router picks depends on the tokens
    for layer in decoder_layers(model):
        if any(id(p) in watch.read for p in layer.parameters()):
            watch.read.update(id(p) for p in layer.parameters())
    return [(name, p) for name, p in model.named_parameters() if p.requires_grad and id(p) not in watch.read]

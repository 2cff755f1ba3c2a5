"""Make a fake-CPU run take the dtype and kernel decisions a CUDA run takes.

The trace runs on the fake `cpu` device (fake `cuda` aborts on CPU-only builds), so CPU-specific
behaviours would leak into the measurement. This module's `CudaSemantics` torch-function mode
corrects three; it sits above autograd, so every cast it adds is recorded by autograd (and saved for
backward) exactly like a cast made by CUDA autocast.

1. Autocast op lists. `torch.autocast("cpu")` casts matmuls to 16 bits like CUDA, but its fp32
   lists differ (verified on torch 2.13: under CPU autocast a bf16 input to these ops stays bf16):
     * CUDA "fp32" ops (`AT_FORALL_FP32` in ATen/autocast_mode.h): layer_norm, rms_norm, group_norm,
       pow, rsqrt, exp, log, softplus, logsumexp, ... run in fp32 on CUDA;
     * CUDA "fp32_set_opt_dtype" ops: softmax, log_softmax, cumsum, sum, prod, norms get
       dtype=float32 on CUDA when no dtype is given (GPT-2's eager softmax: fp32 probabilities);
     * CUDA casts addmv, addr and mv to 16 bits, CPU does not;
     * CUDA computes an fp32 (log_)softmax of an fp16 input in one kernel (`half_to_float`), CPU
       first copies the input to fp32 (eager attention scores under fp16-mixed);
     * CPU autocast casts cross_entropy's input to fp32 up front (an extra fp32 copy of the logits),
       CUDA only runs its log_softmax in fp32: `cross_entropy` is re-composed as on CUDA.
   The mode applies the CUDA policy to these ops whenever CPU autocast is on, before CPU autocast
   sees them. Ops both lists agree on are left to CPU autocast. Activation recomputation runs
   inside backward, where torch-function modes are off: checkpoints get `checkpoint_contexts`.
2. Dropout. CUDA runs `native_dropout`, which keeps a bool mask; the CPU composite keeps its noise
   tensor in the input dtype (2 bytes per element in bf16 instead of 1). `dropout` runs as on CUDA.
   (Dropout inside SDPA's math kernel, C++ below this mode, keeps the CPU form: only fp32 GQA
   models with attention dropout hit it.)
3. SDPA kernel choice. On CPU, SDPA runs the flash kernel (keeps output + fp32 logsumexp, as CUDA
   flash does) for any dtype and GQA, but falls back to the math kernel (materialises b x h x s x s)
   whenever dropout > 0. CUDA picks flash for fp16/bf16 without a mask, memory-efficient otherwise
   (also output + logsumexp) unless GQA is requested (it has no GQA support), and math last. The
   mode decides as CUDA would; fused kernels run on CPU with dropout 0 (CUDA's in-kernel dropout
   keeps only an RNG seed), math runs as math (with its dropout mask). Simplification: head-dim
   limits (flash <= 256) and alignment are checked, cuDNN attention is not considered.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.overrides import TorchFunctionMode

_LOW = (torch.float16, torch.bfloat16)

# Names of the Python entry points (torch.*, Tensor.*, F.*) of CUDA autocast's policies that CPU
# autocast does not apply. In-place variants are not autocast on CUDA either.
_CUDA_FP32 = frozenset({
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal",
    "rsqrt", "sinh", "tan", "pow", "__pow__", "__rpow__", "softplus", "layer_norm",
    "rms_norm", "group_norm", "cosine_similarity", "logsumexp", "renorm", "dist",
})
_CUDA_FP32_SET_OPT_DTYPE = frozenset({
    "softmax", "log_softmax", "cumsum", "cumprod", "sum", "vector_norm", "norm",
})
_CUDA_LOWER = frozenset({"addmv", "addr", "mv"})


def _cast(value, dtype: torch.dtype, only: tuple[torch.dtype, ...]):
    if isinstance(value, torch.Tensor) and value.dtype in only:
        return value.to(dtype)
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, dtype, only) for v in value)
    return value


def _dtype_given(args, kwargs) -> bool:
    return kwargs.get("dtype") is not None or any(isinstance(a, torch.dtype) for a in args)


def _has_low(args) -> bool:
    return any(isinstance(a, torch.Tensor) and a.dtype in _LOW for a in args)


_SOFTMAXES = {"softmax": torch._softmax, "log_softmax": torch._log_softmax}


def _half_to_float_softmax(name: str, args, kwargs, autocast: bool):
    """CUDA computes an fp32 (log_)softmax of an fp16 tensor in one kernel (half_to_float); the CPU
    composite first makes an fp32 copy of the input. None where this does not apply."""
    x = args[0] if args else kwargs.get("input")
    dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
    if not isinstance(x, torch.Tensor) or x.dtype is not torch.float16 or not isinstance(dim, int):
        return None
    dtype = kwargs.get("dtype") or next((a for a in args if isinstance(a, torch.dtype)), None)
    if dtype is None and autocast:
        dtype = torch.float32  # CUDA autocast: fp32_set_opt_dtype
    if dtype is not torch.float32:
        return None
    return _SOFTMAXES[name](x, dim, True)


def _fused_dropout(args, kwargs):
    """CUDA dropout is one kernel that keeps a bool mask (1 B/element); the CPU composite keeps its
    noise tensor in the input dtype (2-4 B/element). None where CUDA would not fuse either."""
    x = args[0] if args else kwargs.get("input")
    p = kwargs.get("p", args[1] if len(args) > 1 else 0.5)
    training = kwargs.get("training", kwargs.get("train", args[2] if len(args) > 2 else True))
    inplace = kwargs.get("inplace", args[3] if len(args) > 3 else False)
    if not isinstance(x, torch.Tensor) or not training or inplace or not 0 < p < 1 or x.numel() == 0:
        return None
    return torch.native_dropout(x, p, True)[0]


def cuda_sdpa_backend(dtype: torch.dtype, heads_q: int, heads_kv: int, head_dim: int,
                      has_mask: bool, enable_gqa: bool) -> SDPBackend:
    """The SDPA kernel PyTorch picks on a recent NVIDIA GPU (priority flash > efficient > math)."""
    gqa = enable_gqa and heads_q != heads_kv
    if dtype in _LOW and not has_mask and head_dim <= 256 and head_dim % 8 == 0:
        return SDPBackend.FLASH_ATTENTION
    alignment = 8 if dtype in _LOW else 4
    if not gqa and head_dim % alignment == 0:
        return SDPBackend.EFFICIENT_ATTENTION
    return SDPBackend.MATH


class CudaSemantics(TorchFunctionMode):
    """Torch-function mode: CUDA autocast policy on top of CPU autocast, and CUDA's SDPA choice."""

    def __init__(self) -> None:
        super().__init__()
        self.sdpa_choices: dict[str, int] = {}  # backend name -> calls, reported in notes

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name == "scaled_dot_product_attention":
            return self._sdpa(func, args, kwargs)
        if name == "dropout" and (fused := _fused_dropout(args, kwargs)) is not None:
            return fused
        autocast = torch.is_autocast_enabled("cpu")
        if name in _SOFTMAXES and (fused := _half_to_float_softmax(name, args, kwargs, autocast)) is not None:
            return fused
        if not autocast:
            return func(*args, **kwargs)
        if name in _CUDA_FP32 and _has_low(args):
            return func(*_cast(args, torch.float32, _LOW), **kwargs)
        if name in _CUDA_FP32_SET_OPT_DTYPE and _has_low(args) and not _dtype_given(args, kwargs):
            return func(*args, **{**kwargs, "dtype": torch.float32})
        if name in _CUDA_LOWER:
            return func(*_cast(args, torch.get_autocast_dtype("cpu"), (torch.float32,)), **kwargs)
        if name == "cross_entropy" and _has_low(args[:1]):
            return self._cross_entropy(*args, **kwargs)
        return func(*args, **kwargs)

    def checkpoint_contexts(self):
        """`context_fn` for torch.utils.checkpoint: the autograd engine runs recomputation without
        the caller's torch-function modes (verified on torch 2.13), so the re-run enters this mode
        again and makes the same dtype and kernel decisions as the first forward."""
        return nullcontext(), self._reentered()

    @contextmanager
    def _reentered(self):
        with self:
            yield

    @staticmethod
    def _cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                       reduce=None, reduction="mean", label_smoothing=0.0):
        if label_smoothing or target.is_floating_point() or size_average is not None or reduce is not None:
            return F.cross_entropy(input, target, weight, size_average, ignore_index, reduce, reduction,
                                   label_smoothing)
        # CUDA: log_softmax is fp32_set_opt_dtype (one half_to_float kernel for fp16), nll_loss is fp32.
        dim = 1 if input.dim() > 1 else 0
        log_probs = (torch._log_softmax(input, dim, True) if input.dtype is torch.float16
                     else F.log_softmax(input, dim=dim, dtype=torch.float32))
        return F.nll_loss(log_probs, target, weight, ignore_index=ignore_index, reduction=reduction)

    def _sdpa(self, func, args, kwargs):
        bound = _sdpa_arguments(*args, **kwargs)
        q, k = bound["query"], bound["key"]
        dtype = q.dtype
        if torch.is_autocast_enabled("cpu") and q.is_floating_point():
            dtype = torch.get_autocast_dtype("cpu")
        backend = cuda_sdpa_backend(dtype, q.shape[-3], k.shape[-3], q.shape[-1],
                                    bound["attn_mask"] is not None, bound["enable_gqa"])
        self.sdpa_choices[backend.name.lower()] = self.sdpa_choices.get(backend.name.lower(), 0) + 1
        if backend is SDPBackend.MATH:
            with sdpa_kernel(SDPBackend.MATH):
                return func(**bound)
        bound["dropout_p"] = 0.0  # fused CUDA kernels drop out in-kernel: no mask is stored
        if bound["value"].shape[-1] == q.shape[-1]:
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):  # the CPU fused kernel (output + logsumexp)
                try:
                    return func(**bound)
                except RuntimeError as exc:  # inputs CUDA's memory-efficient kernel takes and the CPU
                    if "No available kernel" not in str(exc):  # kernel does not (Doge's mask)
                        raise
        # v narrower than q and k (DeepSeek's MLA), or inputs the CPU fused kernel refuses: CUDA's
        # memory-efficient kernel takes them; stand in with what the fused kernel keeps. Under autocast
        # the kernel gets (and keeps) the 16-bit casts CUDA autocast makes of its inputs, which an
        # autograd Function called directly would not get (DeepSeek-V3 builds an fp32 query when its
        # rotary part meets fp32 cos/sin).
        qkv = [bound[name] for name in ("query", "key", "value")]
        if torch.is_autocast_enabled("cpu"):
            qkv = [t.to(dtype) if t.is_floating_point() else t for t in qkv]
        mask = bound["attn_mask"]  # a learned bias (Doge's dynamic mask) gets its gradient, as on CUDA
        learned = isinstance(mask, torch.Tensor) and mask.requires_grad
        return _FusedAttentionStandIn.apply(*qkv, mask if learned else None)


class _FusedAttentionStandIn(torch.autograd.Function):
    """A fused attention kernel's memory without its arithmetic (fake tensors have no values): the
    output, an fp32 logsumexp per query row, and q, k, v and both kept for backward (and a bias
    that needs a gradient, kept and given one)."""

    @staticmethod
    def forward(ctx, query, key, value, bias=None):
        out = query.new_empty((*query.shape[:-1], value.shape[-1]))
        logsumexp = query.new_empty(query.shape[:-1], dtype=torch.float32)
        ctx.save_for_backward(query, key, value, out, logsumexp, *([] if bias is None else [bias]))
        return out

    @staticmethod
    def backward(ctx, grad_out):
        query, key, value, *rest = ctx.saved_tensors
        bias = torch.empty_like(rest[2]) if len(rest) > 2 else None
        return torch.empty_like(query), torch.empty_like(key), torch.empty_like(value), bias


def _sdpa_arguments(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                    enable_gqa=False) -> dict:
    return dict(query=query, key=key, value=value, attn_mask=attn_mask, dropout_p=dropout_p,
                is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)

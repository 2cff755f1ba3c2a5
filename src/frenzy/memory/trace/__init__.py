"""frenzy.memory.trace: measure training memory by running the real step on fake tensors.

`trace_step(model, training, plan, seq_len)` builds the Hugging Face model of one rank from its
config under `FakeTensorMode` (no real memory, no GPU), runs two training steps exactly as the
training worker does, records every allocation and free, and reports the second step as a GPU would:
peak allocated, reserved (through a model of the CUDA caching allocator) and a breakdown by role.
It is the independent yardstick MARP's formulas are checked against.

Modules: tracer (the API), build (model, LoRA, TP shard), qlora (NF4 stand-in), optim (optimizers),
step (the loop), recorder (dispatch-mode allocation log), replay (peaks), allocator (caching
allocator model), cuda_semantics (CUDA autocast and SDPA decisions on CPU), patches (transformers).
"""

from frenzy.core.one_at_a_time import TRANSFORMERS_IMPORT

with TRANSFORMERS_IMPORT:  # whole before any module here asks it for a name (frenzy.core.one_at_a_time)
    import transformers  # noqa: F401

from frenzy.memory.trace.tracer import TraceResult, trace_step  # noqa: E402

__all__ = ["TraceResult", "trace_step"]

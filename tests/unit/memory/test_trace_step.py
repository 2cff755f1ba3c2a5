"""trace_step on tiny models derived from catalog configs, checked against independent numbers:
parameter counts of real (non-fake) models, dtype sizes, the AdamW/SGD/8-bit state layouts, and
the s^2 term of eager attention. Every size is rounded to the CUDA allocator's 512 B blocks."""

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from frenzy.core.hf_config import load_config  # noqa: E402
from frenzy.core.plan import ParallelPlan  # noqa: E402
from frenzy.core.training import Attention, Method, Optimizer, Precision, Recompute, TrainingConfig  # noqa: E402
from frenzy.memory.result import COMPONENTS, Phase  # noqa: E402
from frenzy.memory.trace import trace_step  # noqa: E402
from frenzy.memory.trace.replay import replay  # noqa: E402
from frenzy.memory.trace.tracer import record_steps  # noqa: E402

H, HEADS, KV, HEAD_DIM, INTER, VOCAB, LAYERS, SEQ = 256, 4, 2, 64, 512, 1000, 2, 64


def r512(nbytes: int) -> int:
    return -(-nbytes // 512) * 512


def _write(tmp_path, cfg: dict, name: str) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(cfg))
    return str(path)


@pytest.fixture
def llama(tmp_path) -> str:
    """Llama-3.2-1B's config (GQA, tied embeddings, llama3 rope) shrunk to 2 layers of width 256."""
    cfg, _ = load_config("meta-llama/Llama-3.2-1B")
    cfg.update(num_hidden_layers=LAYERS, hidden_size=H, intermediate_size=INTER, num_attention_heads=HEADS,
               num_key_value_heads=KV, head_dim=HEAD_DIM, vocab_size=VOCAB, bos_token_id=1, eos_token_id=2)
    return _write(tmp_path, cfg, "llama")


def _real_model(path: str, dtype=torch.float32):
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = json.loads(open(path).read())
    kwargs = {k: v for k, v in cfg.items() if not k.startswith("_") and k not in ("model_type", "torch_dtype")}
    return AutoModelForCausalLM.from_config(AutoConfig.for_model(cfg["model_type"], **kwargs), dtype=dtype)


def _static_bytes(model, param_bytes: int) -> tuple[int, int]:
    """(parameters + buffers, parameters) in bytes at `param_bytes` per element, 512 B blocks."""
    params = sum(r512(p.numel() * param_bytes) for p in model.parameters())
    buffers = sum(r512(b.numel() * b.element_size()) for b in model.buffers())
    return params + buffers, params


def _trace(path, seq=SEQ, plan=None, **training):
    return trace_step(path, TrainingConfig(**training), plan or ParallelPlan(), seq)


def test_fp32_adamw_breakdown_matches_real_model_counts(llama):
    weights, params = _static_bytes(_real_model(llama), 4)
    result = _trace(llama, precision=Precision.FP32)
    est = result.estimate
    # The optimizer step peaks: weights, gradients, exp_avg + exp_avg_sq, and foreach AdamW's
    # exp_avg_sq_sqrt list (one state-sized temporary).
    assert est.peak_phase is Phase.OPTIMIZER
    assert est.breakdown["weights"] == weights
    assert est.breakdown["gradients"] == params
    assert est.breakdown["optimizer_state"] == 2 * params
    assert est.breakdown["temporaries"] == params
    assert result.params == result.trainable_params == sum(p.numel() for p in _real_model(llama).parameters())


def test_estimate_is_consistent(llama):
    est = _trace(llama).estimate
    assert est.source == "trace"
    assert set(est.breakdown) == set(COMPONENTS)
    traced = sum(est.breakdown[c] for c in COMPONENTS if c not in ("allocator_overhead", "runtime_overhead"))
    assert traced == est.allocated_bytes
    assert est.breakdown["allocator_overhead"] == est.reserved_bytes - est.allocated_bytes >= 0
    assert est.device_bytes == est.reserved_bytes and est.breakdown["runtime_overhead"] == 0


def test_pure_bf16_states_are_bf16(llama):
    _, params = _static_bytes(_real_model(llama), 2)
    est = _trace(llama, precision=Precision.BF16).estimate
    assert est.breakdown["optimizer_state"] == 2 * params
    assert est.breakdown["gradients"] == params


def test_mixed_precision_keeps_16bit_weight_copies_until_backward(llama):
    real = _real_model(llama)
    casts = sum(r512(m.weight.numel() * 2) for m in real.modules() if isinstance(m, torch.nn.Linear))
    recording = record_steps(llama, TrainingConfig(precision=Precision.BF16_MIXED), ParallelPlan(), SEQ)
    marks = replay(recording.log, measured_step=1).at_marks
    # Every matmul weight (the tied LM head included) has a bf16 copy saved for backward.
    assert marks["step1.backward"]["weights"] - marks["step1.forward"]["weights"] == casts
    # What the loss keeps into backward: fp32 log-probabilities (b x s x V) and the loss scalar.
    assert marks["step1.backward"]["logits_loss"] == r512(SEQ * VOCAB * 4) + 512


def test_optimizer_variants(llama):
    weights, params = _static_bytes(_real_model(llama), 4)
    ids = 2 * r512(SEQ * 8)  # the token ids and the labels (their own tensor)
    sizes = [p.numel() for p in _real_model(llama).parameters()]
    adam8 = sum(2 * r512(4 * n) if n < 4096 else 2 * r512(n) + 2 * r512(4 * -(-n // 256)) for n in sizes)
    expected_state = {
        Optimizer.SGD: params,  # one momentum buffer
        Optimizer.ADAMW_FUSED: 2 * params + 512 * len(sizes),  # + a device `step` per parameter
        Optimizer.ADAMW_8BIT: adam8 + 2 * 1024,  # + the two shared 256-entry quantisation maps
    }
    for optimizer, state in expected_state.items():
        result = _trace(llama, precision=Precision.FP32, optimizer=optimizer)
        assert result.estimate.breakdown["optimizer_state"] == state, optimizer
        # In-place updates: nothing beyond weights, gradients, state and the token ids.
        assert result.peak_by_phase[Phase.OPTIMIZER] == weights + params + state + ids, optimizer


def test_eager_attention_adds_quadratic_scores(llama):
    def extra(seq):
        eager = _trace(llama, seq=seq, attention=Attention.EAGER).activation_bytes_per_layer
        return eager - _trace(llama, seq=seq, attention=Attention.SDPA).activation_bytes_per_layer

    # Eager keeps fp32 softmax probabilities and their bf16 copy (4 + 2 bytes per score): the s^2
    # part of the difference doubles-and-doubles when s doubles, the linear part cancels.
    assert extra(2 * SEQ) - 2 * extra(SEQ) == HEADS * 6 * (4 - 2) * SEQ**2


def test_sdpa_never_stores_scores_and_sees_no_mask(llama):
    small, large = _trace(llama, seq=SEQ), _trace(llama, seq=2 * SEQ)
    assert abs(large.activation_bytes_per_layer - 2 * small.activation_bytes_per_layer) <= 2048
    # A mask (e.g. from the fake-tensor packed-sequence pitfall) would rule out the flash kernel.
    assert any("flash_attention" in note for note in small.notes)
    assert not any("efficient" in note or "math" in note for note in small.notes)


def test_recomputation(llama):
    none = _trace(llama).activation_bytes_per_layer
    full = _trace(llama, plan=ParallelPlan(recompute=Recompute.FULL)).activation_bytes_per_layer
    assert full == SEQ * H * 4  # only the layer's fp32 residual output is kept
    assert full * 10 < none

    def extra(seq, recompute):
        plan = ParallelPlan(recompute=recompute)
        eager = _trace(llama, seq=seq, plan=plan, attention=Attention.EAGER).activation_bytes_per_layer
        return eager - _trace(llama, seq=seq, attention=Attention.SDPA).activation_bytes_per_layer

    for mode in (Recompute.ATTENTION, Recompute.SELECTIVE):  # eager scores are recomputed under both
        # no s^2 term left (eager scores here: HEADS x s x s x 6 B, ~400 kB at 2 x SEQ); 512-byte rounding aside
        assert abs(extra(2 * SEQ, mode) - 2 * extra(SEQ, mode)) <= 2048, mode


def test_lora_trains_adapters_only(llama):
    rank = 8
    adapters = [(H, HEADS * HEAD_DIM), (H, KV * HEAD_DIM)]  # q_proj, v_proj (in, out)
    trainable = LAYERS * sum(rank * (fan_in + fan_out) for fan_in, fan_out in adapters)
    grads = LAYERS * sum(r512(rank * fan_in * 4) + r512(fan_out * rank * 4) for fan_in, fan_out in adapters)
    result = _trace(llama, method=Method.LORA, lora_rank=rank, lora_targets=("q", "v"))
    assert result.trainable_params == trainable
    assert result.estimate.breakdown["optimizer_state"] == 2 * grads  # fp32 AdamW state of the adapters
    recording = record_steps(llama, TrainingConfig(method=Method.LORA), ParallelPlan(), SEQ)
    frozen, _ = _static_bytes(_real_model(llama, torch.bfloat16), 2)
    assert replay(recording.log, 1).at_marks["step1.forward"]["weights"] == frozen + grads


def test_qlora_stores_nf4_codes_and_constants(llama):
    recording = record_steps(llama, TrainingConfig(method=Method.QLORA), ParallelPlan(), SEQ)
    kv = KV * HEAD_DIM
    sizes = [H * H, H * kv, H * kv, H * H, H * INTER, H * INTER, H * INTER]  # q k v o gate up down
    # packed 4-bit codes, uint8 absmax per 64, fp32 absmax per 256 blocks, fp32 offset, 16-entry code
    nf4 = LAYERS * sum(r512(n // 2) + r512(n // 64) + r512(4 * -(-n // 64 // 256)) + 512 + 512 for n in sizes)
    nf4 += 256 * 4  # the shared dynamic map
    bf16_rest = r512(VOCAB * H * 2) + (2 * LAYERS + 1) * r512(H * 2) + 2 * 512  # embedding, norms, rope
    adapters = LAYERS * (3 * r512(8 * H * 4) + r512(kv * 8 * 4))  # q: A, B; v: A (8 x H), B (kv x 8)
    assert replay(recording.log, 1).at_marks["step1.forward"]["weights"] == nf4 + bf16_rest + adapters
    assert any("QLoRA" in note for note in recording.notes)


def test_tensor_parallel_rank(llama, tmp_path):
    tp = 2
    layer = H * (HEADS // tp * HEAD_DIM) * 2 + H * (KV // tp * HEAD_DIM) * 2 + 3 * H * INTER // tp + 2 * H
    result = _trace(llama, plan=ParallelPlan(tp=tp))
    assert result.params == VOCAB // tp * H + LAYERS * layer + H
    cfg, _ = load_config("openai-community/gpt2")
    with pytest.raises(ValueError, match="llama-style"):
        _trace(_write(tmp_path, cfg, "gpt2"), plan=ParallelPlan(tp=tp))


def test_mixtral_moe(tmp_path):
    cfg, _ = load_config("mistralai/Mixtral-8x7B-v0.1")
    cfg.update(num_hidden_layers=LAYERS, hidden_size=H, intermediate_size=INTER, num_attention_heads=HEADS,
               num_key_value_heads=KV, num_local_experts=4, num_experts_per_tok=2, vocab_size=VOCAB,
               bos_token_id=1, eos_token_id=2)
    path = _write(tmp_path, cfg, "mixtral")
    real_params = sum(p.numel() for p in _real_model(path).parameters())
    for precision in (Precision.BF16, Precision.BF16_MIXED):  # grouped GEMM in bf16; fallback for fp32
        result = _trace(path, precision=precision)
        assert result.params == real_params
        assert result.activation_bytes_per_layer > 0
    lora = _trace(path, method=Method.LORA, lora_targets=("all-linear",))
    assert lora.trainable_params == LAYERS * 8 * (2 * (H + HEADS * HEAD_DIM) + 2 * (H + KV * HEAD_DIM))


def test_gpt2_fused_qkv_lora(tmp_path):
    cfg, _ = load_config("openai-community/gpt2")
    cfg.update(n_layer=LAYERS, n_embd=H, n_head=HEADS, vocab_size=VOCAB, n_positions=256)
    result = _trace(_write(tmp_path, cfg, "gpt2"), method=Method.LORA, lora_targets=("q", "v"))
    assert result.trainable_params == LAYERS * 8 * (H + 3 * H)  # the fused c_attn is adapted whole
    with pytest.raises(ValueError, match="learned positions"):  # a GPU would fail with an index error
        _trace(_write(tmp_path, cfg, "gpt2"), seq=cfg["n_positions"] + 1)


def test_gradient_accumulation_keeps_one_gradient_buffer(llama):
    _, params = _static_bytes(_real_model(llama), 4)
    result = _trace(llama, precision=Precision.FP32, plan=ParallelPlan(grad_accum=2))
    assert result.estimate.breakdown["gradients"] == params


def test_trace_is_deterministic(llama):
    first, second = _trace(llama, attention=Attention.EAGER), _trace(llama, attention=Attention.EAGER)
    assert first.estimate == second.estimate
    assert first.peak_by_phase == second.peak_by_phase
    assert first.activation_bytes_per_layer == second.activation_bytes_per_layer


def test_fsdp2_param_mode_traces_the_rank_shards_and_bf16_gathers(llama):
    """FSDP2 at world size 2 on a fake process group: the recorder counts each parameter's fp32
    local shard (half of it); after the last layer's forward the bf16 root unit (tied embedding,
    final norm) is gathered beside the last layer's bf16 flat all-gather buffer, and resharded
    before backward; gradients end as fp32 shards."""
    from frenzy.core.plan import MixedPrecisionMode
    from frenzy.core.training import ZeroStage

    real = _real_model(llama)
    shards = sum(r512(p.numel() * 4 // 2) for p in real.parameters())
    buffers = sum(r512(b.numel() * b.element_size()) for b in real.buffers())
    layer = sum(p.numel() for p in real.model.layers[0].parameters())
    root = sum(p.numel() for p in real.parameters()) - LAYERS * layer
    plan = ParallelPlan(dp=2, zero=ZeroStage.PARAMETERS, mixed_precision=MixedPrecisionMode.FSDP2_PARAM)
    recording = record_steps(llama, TrainingConfig(precision=Precision.BF16_MIXED), plan, SEQ)
    marks = replay(recording.log, measured_step=1).at_marks
    assert marks["step1.forward"]["weights"] == shards + buffers
    gathered = marks[f"layer_post.{LAYERS - 1}"]["weights"] - marks["step1.forward"]["weights"]
    assert gathered == pytest.approx(2 * root + 2 * layer, rel=0.01)
    assert marks["step1.backward"]["weights"] == shards + buffers
    assert marks["step1.optimizer"]["gradients"] == pytest.approx(4 * (root + LAYERS * layer) / 2, rel=0.01)

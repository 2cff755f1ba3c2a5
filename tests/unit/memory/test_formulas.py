"""MARP's formulas against published closed forms and published counts."""

import dataclasses

import pytest

from frenzy.core.hf_config import load_model
from frenzy.core.model import Norm
from frenzy.core.plan import ParallelPlan
from frenzy.core.training import Attention, Method, Optimizer, Precision, Recompute, TrainingConfig, ZeroStage
from frenzy.memory import activations as act
from frenzy.memory import states


def megatron_gpt(hidden=4096, heads=32):
    """A GPT layer as Korthikanti et al. model it: LayerNorm, fused QKV, GELU MLP of 4h, dropout
    after attention scores and after both blocks, softmax in the compute dtype, a fused GELU."""
    gpt2 = load_model("gpt2")
    arch = load_model("gpt2-xl")
    linears = []
    for lin in arch.linears:
        scale_in = hidden / arch.hidden_size
        linears.append(dataclasses.replace(lin, in_features=int(lin.in_features * scale_in),
                                           out_features=int(lin.out_features * scale_in)))
    return dataclasses.replace(arch, hidden_size=hidden, num_heads=heads, num_kv_heads=heads,
                               head_dim=hidden // heads, intermediate_size=4 * hidden, linears=tuple(linears),
                               attention_dropout=0.1, hidden_dropout=0.1, norm=Norm.LAYER,
                               eager_softmax_fp32=gpt2.eager_softmax_fp32, activation="gelu")


KORTHIKANTI_CASES = [  # (seq, micro-batch, tp, sequence parallel)
    (2048, 1, 1, False),
    (2048, 4, 2, False),
    (4096, 1, 8, False),
    (2048, 2, 4, True),
    (8192, 1, 8, True),
]


@pytest.mark.parametrize("seq,batch,tp,sp", KORTHIKANTI_CASES)
def test_activation_inventory_matches_korthikanti_table2(seq, batch, tp, sp):
    """Table 2 of Korthikanti et al. 2022: sbh(34 + 5as/h) per layer, tensor parallel
    sbh(10 + 24/t + 5as/(ht)), sequence parallel sbh/t (34 + 5as/h) (plus the gathered inputs torch
    keeps); 16-bit, no recomputation."""
    arch = megatron_gpt()
    training = TrainingConfig(precision=Precision.BF16, attention=Attention.EAGER)
    plan = ParallelPlan(tp=tp, sequence_parallel=sp)
    s, b, h, a = seq, batch, arch.hidden_size, arch.num_heads
    if sp:
        # torch's sequence parallelism keeps the all-gathered 16-bit inputs of the QKV and the first
        # MLP projection (2sbh each), which Megatron-LM re-gathers in backward instead
        paper = s * b * h / tp * (34 + 5 * a * s / h) + 2 * 2 * s * b * h * (1 - 1 / tp)
    elif tp > 1:
        paper = s * b * h * (10 + 24 / tp + 5 * a * s / (h * tp))
    else:
        paper = s * b * h * (34 + 5 * a * s / h)
    ours = act.layer_bytes_per_token(arch, training, plan, seq) * s * b
    # LayerNorm mean/rstd (8 B per token per norm) are below the paper's resolution.
    assert ours == pytest.approx(paper, rel=0.002)


def test_attention_core_recompute_drops_the_attention_score_term():
    arch = megatron_gpt()
    training = TrainingConfig(precision=Precision.BF16, attention=Attention.EAGER)
    seq = 2048
    full = act.layer_bytes_per_token(arch, training, ParallelPlan(), seq)
    attention = act.layer_bytes_per_token(arch, training, ParallelPlan(recompute=Recompute.ATTENTION), seq)
    assert full - attention == 5 * arch.num_heads * seq  # Korthikanti: 5as/h x h per token


def _full_states(arch, precision, optimizer=Optimizer.ADAMW, dp=1, zero=ZeroStage.NONE):
    training = TrainingConfig(precision=precision, optimizer=optimizer)
    plan = ParallelPlan(dp=dp, zero=zero)
    params = states.stage_params(arch, training, plan, 0)
    return training, plan, params


def test_mixed_precision_adam_costs_16_to_18_bytes_per_parameter():
    """ZeRO (Rajbhandari et al. 2020) sec. 3.1: mixed-precision Adam keeps 16 B/param of model
    states; the 16-bit weight copies used by the matmuls add up to 2 more."""
    arch = load_model("llama-2-7b")
    training, plan, params = _full_states(arch, Precision.BF16_MIXED)
    model_states = (states.weight_bytes(params, training, plan) + states.gradient_bytes(params, training, plan)
                    + states.optimizer_state_bytes(params, training, plan))
    assert model_states == 16 * arch.num_params
    with_copies = model_states + states.autocast_weight_copy_bytes(params, training, plan)
    assert 16 * arch.num_params < with_copies <= 18 * arch.num_params


def test_zero_paper_memory_example():
    """ZeRO paper Fig. 1: Psi = 7.5B, N_d = 64, K = 12: baseline 120 GB, P_os+g+p 1.9 GB per GPU."""
    arch = load_model("llama-2-7b")
    psi = 7.5e9
    scale = psi / arch.num_params
    for zero, paper_gb in [(ZeroStage.NONE, 120.0), (ZeroStage.PARAMETERS, 1.875)]:
        training, plan, params = _full_states(arch, Precision.BF16_MIXED, dp=64, zero=zero)
        total = (states.weight_bytes(params, training, plan) + states.gradient_bytes(params, training, plan)
                 + states.optimizer_state_bytes(params, training, plan))
        assert total * scale / 1e9 == pytest.approx(paper_gb, rel=0.01)


@pytest.mark.parametrize("zero", list(ZeroStage))
def test_zero_stages_divide_what_they_shard(zero):
    arch = load_model("llama-2-7b")
    t0, p0, params = _full_states(arch, Precision.BF16_MIXED)
    t, p, _ = _full_states(arch, Precision.BF16_MIXED, dp=8, zero=zero)
    expected = {
        "optimizer": 8 if zero >= ZeroStage.OPTIMIZER else 1,
        "gradients": 8 if zero >= ZeroStage.GRADIENTS else 1,
        "weights": 8 if zero >= ZeroStage.PARAMETERS else 1,
    }
    assert states.optimizer_state_bytes(params, t, p) * expected["optimizer"] == states.optimizer_state_bytes(params, t0, p0)
    assert states.gradient_bytes(params, t, p) * expected["gradients"] == states.gradient_bytes(params, t0, p0)
    assert states.weight_bytes(params, t, p) * expected["weights"] == states.weight_bytes(params, t0, p0)


@pytest.mark.parametrize("model,published", [("llama-2-7b", 4_194_304), ("llama-2-13b", 6_553_600)])
def test_lora_trainable_parameters_match_litgpt(model, published):
    """LitGPT resource tables: LoRA r=8 on q and v trains 4,194,304 (7B) and 6,553,600 (13B) parameters."""
    arch = load_model(model)
    training = TrainingConfig(method=Method.LORA, lora_rank=8, lora_targets=("q", "v"))
    assert states.stage_params(arch, training, ParallelPlan(), 0).trainable == published


def test_pure_bf16_adam_is_8_bytes_per_parameter():
    """torchtune/LitGPT bf16-true: bf16 weights, grads and both Adam moments, 2 B each."""
    arch = load_model("llama-3.2-3b")
    training, plan, params = _full_states(arch, Precision.BF16)
    total = (states.weight_bytes(params, training, plan) + states.gradient_bytes(params, training, plan)
             + states.optimizer_state_bytes(params, training, plan))
    assert total == 8 * arch.num_params


def test_qlora_stores_about_half_a_byte_per_quantised_parameter():
    """QLoRA (Dettmers et al. 2023) sec. 3: NF4 with double quantisation costs 4.127 bits/param."""
    arch = load_model("llama-2-7b")
    training = TrainingConfig(method=Method.QLORA, precision=Precision.BF16)
    params = states.stage_params(arch, training, ParallelPlan(), 0)
    quantised = states.weight_bytes(params, training, ParallelPlan()) - params.frozen_other * 2 - params.trainable * 2
    assert quantised * 8 / params.frozen_linear == pytest.approx(4.127, abs=0.01)


def test_eight_bit_adam_state_is_about_two_bytes_per_parameter():
    arch = load_model("llama-2-7b")
    training, plan, params = _full_states(arch, Precision.BF16, optimizer=Optimizer.ADAMW_8BIT)
    assert states.optimizer_state_bytes(params, training, plan) / arch.num_params == pytest.approx(2.03, abs=0.01)


def test_tensor_parallel_shards_projection_weights():
    arch = load_model("llama-2-7b")
    training = TrainingConfig()
    one = states.stage_params(arch, training, ParallelPlan(), 0).trainable
    eight = states.stage_params(arch, training, ParallelPlan(tp=8), 0).trainable
    assert one / eight == pytest.approx(8, rel=0.01)


def test_pipeline_stages_split_layers_evenly():
    arch = load_model("llama-2-7b")  # 32 layers
    assert [states.layers_on_stage(arch, 3, s) for s in range(3)] == [11, 11, 10]

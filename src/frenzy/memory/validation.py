"""MARP against the fake-tensor trace of the real training step, configuration by configuration.

A `Case` names a model (catalog name, or a catalog config shrunk to a few layers so it traces in
seconds), training settings and a plan. `compare` runs both and reports the allocated-peak error
and the per-term differences at the peak. The trace runs the real Hugging Face code, so where
the two disagree the formula is what gets fixed.

Terms are compared with a floor: a term within 5% of itself, or within 0.5% of the allocated peak
(a term of a few MiB beside a 20 GiB peak is allowed a few MiB of rounding).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from frenzy.core import catalog
from frenzy.core.generic import LAYER_COUNT_KEYS, per_layer_keys
from frenzy.core.hf_config import load_model
from frenzy.core.job import JobSpec
from frenzy.core.plan import ParallelPlan
from frenzy.core.training import TrainingConfig
from frenzy.memory.estimate import estimate
from frenzy.memory.result import MemoryEstimate

PEAK_TOLERANCE = 0.03
TERM_TOLERANCE = 0.05
TERM_FLOOR_OF_PEAK = 0.005
COMPARED_TERMS = ("weights", "gradients", "optimizer_state", "activations", "logits_loss", "temporaries")


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    model: str  # catalog name, or a path to a config.json
    training: TrainingConfig
    plan: ParallelPlan
    seq_len: int
    layers: int | None = None  # shrink the catalog config to this many layers (fast cases)
    overrides: tuple[tuple[str, object], ...] = ()  # further config changes, e.g. a small MoE
    profiled: bool = False  # predict through the profiled path (frenzy.core.generic) even with a formula

    @property
    def label(self) -> str:
        t, p = self.training, self.plan
        shrunk = f"[{self.layers}L]" if self.layers else ""
        extra = "".join(f" {k}={v}" for k, v in self.overrides)
        method = t.method.value + (f"-r{t.lora_rank}" if t.method.value != "full" else "")
        model = Path(self.model).stem if self.model.endswith(".json") else self.model
        sharded = f" dp{p.dp} zero{int(p.zero)}" if p.dp > 1 else ""
        mode = " fsdp2-param" if p.fsdp_param_dtype else ""
        accum = f" ga{p.grad_accum}" if p.grad_accum > 1 else ""
        return (f"{model}{shrunk}{extra} {t.precision.value}{mode} {method} {t.attention.value} "
                f"{p.recompute.name.lower()} mb{p.micro_batch}{accum} s{self.seq_len} tp{p.tp}"
                f"{'+sp' if p.sequence_parallel else ''}{sharded}")

    def config_path(self, folder: Path) -> str:
        """The model argument both sides accept: the catalog name, or a written shrunk config."""
        if not self.layers and not self.overrides:
            return self.model
        path = Path(self.model)
        cfg = json.loads(path.read_text()) if path.suffix == ".json" else dict(catalog.model_config(self.model))
        # a multimodal config (Gemma 3) holds its language model in text_config: shrink that one
        text = cfg
        if "text_config" in cfg:
            text = cfg["text_config"] = dict(cfg["text_config"])
        if self.layers:
            stated = any(key in text for key in LAYER_COUNT_KEYS)
            for key in per_layer_keys(text) if stated else ():  # layer_types ...: the first layers' entries
                text[key] = text[key][:self.layers]
            for key in LAYER_COUNT_KEYS:
                if key in text:
                    text[key] = self.layers
            if not stated:
                text["num_hidden_layers"] = self.layers
        if "attention_types" in cfg and self.layers:  # GPT-Neo lists its layer pattern explicitly
            cfg["attention_types"] = [[["global", "local"], max(self.layers // 2, 1)]]
        text.update(dict(self.overrides))
        cfg["_name_or_path"] = self.label
        path = folder / f"{abs(hash(self.label))}.json"
        path.write_text(json.dumps(cfg))
        return str(path)


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    case: Case
    formula: MemoryEstimate
    traced: MemoryEstimate
    trace_seconds: float
    notes: tuple[str, ...] = field(default=())

    @property
    def peak_error(self) -> float:
        return (self.formula.allocated_bytes - self.traced.allocated_bytes) / self.traced.allocated_bytes

    def term_errors(self) -> dict[str, float]:
        """Relative error per term (0 when both are under the floor)."""
        errors = {}
        floor = TERM_FLOOR_OF_PEAK * self.traced.allocated_bytes
        for term in COMPARED_TERMS:
            a, b = self.formula.breakdown.get(term, 0), self.traced.breakdown.get(term, 0)
            errors[term] = 0.0 if abs(a - b) <= floor else (a - b) / max(b, 1)
        return errors

    def misses(self) -> list[str]:
        """What is outside the targets: the allocated peak beyond PEAK_TOLERANCE, terms beyond TERM_TOLERANCE."""
        found = [f"allocated peak off by {self.peak_error:+.2%}"] if abs(self.peak_error) > PEAK_TOLERANCE else []
        found += [f"{t} off by {e:+.1%}" for t, e in self.term_errors().items() if abs(e) > TERM_TOLERANCE]
        return found

    @property
    def ok(self) -> bool:
        return not self.misses()


def compare(case: Case) -> Comparison:
    from frenzy.memory.trace import trace_step  # needs torch: imported only when tracing

    with tempfile.TemporaryDirectory() as folder:
        model = case.config_path(Path(folder))
        arch = load_model(model, profiled=case.profiled)
        job = JobSpec(model=arch, training=case.training, seq_len=case.seq_len,
                      global_batch=case.plan.global_batch)
        formula = estimate(job, case.plan)
        traced = trace_step(model, case.training, case.plan, case.seq_len)
    return Comparison(case=case, formula=formula, traced=traced.estimate, trace_seconds=traced.trace_seconds,
                      notes=traced.notes)


# ---- the validation matrix -----------------------------------------------------------------------

# Published config.json files of families outside the catalog, named by repo id (org--name.json).
TEST_CONFIGS = Path(__file__).resolve().parents[3] / "tests" / "data" / "configs"


def config_file(repo_id: str) -> str:
    return str(TEST_CONFIGS / f"{repo_id.replace('/', '--')}.json")


# A Mixtral-shaped MoE small enough to trace in seconds (8 experts, top-2, GQA).
SMALL_MOE = (("hidden_size", 512), ("intermediate_size", 1792), ("num_attention_heads", 8),
             ("num_key_value_heads", 2), ("vocab_size", 32000))
SMALL_QWEN_MOE = (("hidden_size", 512), ("moe_intermediate_size", 256), ("shared_expert_intermediate_size", 1024),
                  ("num_attention_heads", 8), ("num_key_value_heads", 8), ("num_experts", 16), ("num_experts_per_tok", 4),
                  ("vocab_size", 32000))

# Config files of real models outside the catalog (tests/data/configs), shrunk like the catalog ones.
CONFIGS = Path(__file__).resolve().parents[3] / "tests" / "data" / "configs"
QWEN3_MOE = str(CONFIGS / "Qwen--Qwen3-30B-A3B.json")
# Qwen3-MoE shrunk: 16 routed experts top-4, GQA with head_dim wider than hidden / heads (as in 30B-A3B).
SMALL_QWEN3_MOE = (("hidden_size", 512), ("moe_intermediate_size", 256), ("num_attention_heads", 8),
                   ("num_key_value_heads", 2), ("head_dim", 96), ("num_experts", 16), ("num_experts_per_tok", 4),
                   ("vocab_size", 32000), ("bos_token_id", None), ("eos_token_id", None))

OLMOE = str(CONFIGS / "allenai--OLMoE-1B-7B-0924.json")
# OLMoE shrunk: 16 routed experts top-4, multi-head attention, top-k weights left unnormalised.
SMALL_OLMOE = (("hidden_size", 512), ("intermediate_size", 256), ("num_attention_heads", 8),
               ("num_key_value_heads", 8), ("num_experts", 16), ("num_experts_per_tok", 4), ("vocab_size", 32000),
               ("eos_token_id", None), ("pad_token_id", None))

PHIMOE = str(CONFIGS / "microsoft--Phi-3.5-MoE-instruct.json")
# Phi-3.5-MoE shrunk: 8 experts (sparsemixer top-2), GQA, its own 32064-entry vocabulary.
SMALL_PHIMOE = (("hidden_size", 512), ("intermediate_size", 512), ("num_attention_heads", 8),
                ("num_key_value_heads", 2), ("num_local_experts", 8))


def _case(model, *, precision="bf16-mixed", method="full", attention="sdpa", recompute="none", mb=2, seq=512,
          tp=1, layers=2, targets=("q", "v"), overrides=(), optimizer="adamw", dp=1, zero=0, mixed="autocast", accum=1,
          sp=False):
    from frenzy.core.plan import MixedPrecisionMode
    from frenzy.core.training import Attention, Method, Optimizer, Precision, Recompute, ZeroStage

    training = TrainingConfig(precision=Precision(precision), method=Method(method), attention=Attention(attention),
                              lora_targets=targets, optimizer=Optimizer(optimizer))
    plan = ParallelPlan(micro_batch=mb, tp=tp, recompute=Recompute.parse(recompute), dp=dp, zero=ZeroStage(zero),
                        mixed_precision=MixedPrecisionMode(mixed), grad_accum=accum, sequence_parallel=sp)
    return Case(model=model, training=training, plan=plan, seq_len=seq, layers=layers, overrides=tuple(overrides))


def fast_cases() -> list[Case]:
    """Two-layer versions of catalog models across families and settings: seconds each (make test)."""
    return [
        _case("meta-llama/Llama-3.2-1B", precision="bf16"),
        _case("meta-llama/Llama-3.2-1B"),
        _case("meta-llama/Llama-3.2-1B", precision="fp32", mb=1),
        _case("meta-llama/Llama-3.2-1B", method="lora", targets=("all-linear",)),
        _case("meta-llama/Llama-3.2-1B", precision="bf16", recompute="full", mb=4),
        _case("meta-llama/Llama-3.2-1B", precision="bf16", attention="eager", mb=1),
        _case("meta-llama/Llama-3.2-1B", precision="bf16", tp=2),
        _case("mistralai/Mistral-7B-v0.1", precision="bf16", method="lora", seq=1024, mb=1),
        _case("Qwen/Qwen2.5-0.5B", mb=4),
        _case("Qwen/Qwen2.5-0.5B", method="lora", precision="bf16"),
        _case("Qwen/Qwen3-0.6B", precision="bf16"),
        _case("openai-community/gpt2", precision="bf16", mb=4),
        _case("openai-community/gpt2", mb=4),
        _case("openai-community/gpt2", precision="bf16", attention="eager"),
        _case("EleutherAI/pythia-160m", mb=4),
        _case("EleutherAI/pythia-160m", precision="bf16", method="lora"),
        _case("facebook/opt-125m", precision="bf16", mb=4),
        _case("facebook/opt-350m", precision="bf16"),
        _case("microsoft/phi-1_5", precision="bf16"),
        _case("microsoft/phi-2"),
        _case("microsoft/Phi-3-mini-4k-instruct", precision="bf16"),
        _case("google/gemma-2b", precision="bf16"),
        _case("mistralai/Mixtral-8x7B-v0.1", precision="bf16", overrides=SMALL_MOE),
        _case("stabilityai/stablelm-2-1_6b", precision="bf16"),
        *_moe_cases(),
        *_dense_family_cases(),
        *_deepseek_cases(),
        *_oss_llama4_cases(),
        *fsdp_mixed_cases(fast=True),
    ]


# Families of the fsdp2-param mode's validation: RMSNorm (Llama, Qwen2 with q/k/v biases) and LayerNorm (GPT-2).
FSDP_MIXED_MODELS = ("meta-llama/Llama-3.2-1B", "openai-community/gpt2", "Qwen/Qwen2.5-0.5B")


def fsdp_mixed_cases(fast: bool = False) -> list[Case]:
    """The fsdp2-param mode traced under the real FSDP2 at dp 2 and 4 (memory.trace.fsdp): every
    model x dp x ZeRO 1/2/3 x full/LoRA x no/full recomputation, and configurations whose peak lies
    elsewhere than the loss; `fast`: four of them."""
    mode = dict(mixed="fsdp2-param")
    if fast:
        return [
            _case("meta-llama/Llama-3.2-1B", dp=2, zero=3, **mode),
            _case("openai-community/gpt2", dp=4, zero=1, mb=4, **mode),
            _case("Qwen/Qwen2.5-0.5B", dp=2, zero=2, method="lora", recompute="full", mb=4, **mode),
            _case("meta-llama/Llama-3.2-1B", dp=4, zero=3, method="lora", targets=("all-linear",), mb=4, seq=1024,
                  **mode),
        ]
    lora = dict(targets=("all-linear",))
    matrix = [_case(model, dp=dp, zero=zero, method=method, recompute=recompute, mb=4,
                    **(lora if method == "lora" else {}), **mode)
              for model in FSDP_MIXED_MODELS for dp in (2, 4) for zero in (1, 2, 3)
              for method in ("full", "lora") for recompute in ("none", "full")]
    # short sequences: the peak moves to the root's gradients (a tied embedding's two) and its reduce-scatter
    matrix += [_case(model, dp=dp, zero=zero, mb=1, seq=128, **mode)
               for model in FSDP_MIXED_MODELS for dp in (2, 4) for zero in (1, 3)]
    # gradient accumulation: the fp32 sharded gradients alive through the later micro-batches
    matrix += [_case(model, dp=2, zero=zero, mb=2, accum=2, **mode) for model in FSDP_MIXED_MODELS for zero in (1, 3)]
    # long sequences, a small vocabulary: the peak moves into a layer's backward
    matrix += [_case(model, dp=2, zero=zero, method=method, mb=4, seq=1024, layers=4,
                     overrides=(("vocab_size", 4000),), **(lora if method == "lora" else {}), **mode)
               for model in FSDP_MIXED_MODELS for zero in (1, 3) for method in ("full", "lora")]
    return matrix


def _moe_cases() -> list[Case]:
    """MoE families validated from config files: full, LoRA and QLoRA, pure and mixed precision."""
    q3 = dict(overrides=SMALL_QWEN3_MOE)
    return [
        _case(QWEN3_MOE, precision="bf16", mb=4, seq=1024, **q3),
        _case(QWEN3_MOE, mb=2, seq=1024, **q3),
        _case(QWEN3_MOE, method="lora", targets=("all-linear",), mb=4, **q3),
        _case(QWEN3_MOE, precision="bf16", method="qlora", mb=4, **q3),
        _case(QWEN3_MOE, precision="bf16", recompute="full", mb=4, seq=1024, layers=4, **q3),
        _case(QWEN3_MOE, precision="bf16", tp=2, mb=2, **q3),
        _case(OLMOE, precision="bf16", mb=4, seq=1024, overrides=SMALL_OLMOE),
        _case(OLMOE, mb=2, seq=1024, overrides=SMALL_OLMOE),
        _case(OLMOE, method="lora", targets=("all-linear",), mb=4, overrides=SMALL_OLMOE),
        _case(OLMOE, precision="bf16", method="qlora", mb=4, overrides=SMALL_OLMOE),
        _case(OLMOE, precision="bf16", recompute="full", mb=4, seq=1024, layers=4, overrides=SMALL_OLMOE),
        _case(OLMOE, precision="bf16", method="lora", attention="eager", mb=1, seq=1024, overrides=SMALL_OLMOE),
        _case(PHIMOE, precision="bf16", mb=4, seq=1024, overrides=SMALL_PHIMOE),
        _case(PHIMOE, mb=2, seq=1024, overrides=SMALL_PHIMOE),
        _case(PHIMOE, method="lora", targets=("all-linear",), mb=4, overrides=SMALL_PHIMOE),
        _case(PHIMOE, method="qlora", mb=4, overrides=SMALL_PHIMOE),
        _case(PHIMOE, method="lora", recompute="full", mb=4, seq=1024, layers=4, overrides=SMALL_PHIMOE),
        _case(PHIMOE, precision="bf16", tp=2, mb=4, seq=1024, overrides=SMALL_PHIMOE),
    ]


# The MoE families the worker tensor-parallelises, shrunk to a 4096-entry vocabulary so that what the
# layers keep is a large share of the peak (Mixtral's and PhiMoE's token ids fit it; Qwen's do not).
MOE_TP_MODELS = {
    "mixtral": ("mistralai/Mixtral-8x7B-v0.1", SMALL_MOE),
    "qwen2_moe": ("Qwen/Qwen1.5-MoE-A2.7B", SMALL_QWEN_MOE + (("bos_token_id", None), ("eos_token_id", None))),
    "qwen3_moe": (QWEN3_MOE, SMALL_QWEN3_MOE + (("num_key_value_heads", 4),)),
    "phimoe": (PHIMOE, SMALL_PHIMOE + (("bos_token_id", None), ("eos_token_id", None))),
}


def moe_tp_cases() -> list[Case]:
    """Tensor parallelism of the MoE families, experts split by expert (trace.experts): tp 2 full and
    LoRA, with and without full recomputation, with sequence parallelism; tp 4 where the heads allow."""
    cases = []
    for model, overrides in MOE_TP_MODELS.values():
        small = dict(overrides=overrides + (("vocab_size", 4096),), seq=1024)
        lora = dict(method="lora", targets=("all-linear",))
        cases += [
            _case(model, precision="bf16", tp=2, mb=2, **small),
            _case(model, tp=2, mb=2, **lora, **small),
            _case(model, precision="bf16", tp=2, mb=4, recompute="full", layers=4, **small),
            _case(model, tp=2, mb=4, recompute="full", **lora, **small),
            _case(model, precision="bf16", tp=2, mb=2, sp=True, **small),
            _case(model, tp=2, mb=2, sp=True, **lora, **small),
        ]
    for name in ("qwen2_moe", "qwen3_moe"):  # 8 query and 8 / 4 key-value heads
        model, overrides = MOE_TP_MODELS[name]
        small = dict(overrides=overrides + (("vocab_size", 4096),), seq=1024)
        cases += [_case(model, precision="bf16", tp=4, mb=2, **small),
                  _case(model, tp=4, mb=2, sp=True, method="lora", targets=("all-linear",), **small)]
    return cases


def _dense_family_cases() -> list[Case]:
    """Families validated against published configs kept under tests/data/configs."""
    starcoder2 = config_file("bigcode/starcoder2-3b")
    return [
        _case(starcoder2, precision="bf16", mb=4, seq=1024),
        _case(starcoder2, method="lora", targets=("all-linear",), recompute="full", mb=4, seq=1024),
        _case(starcoder2, precision="bf16", tp=2, mb=4, seq=1024),
        _case(starcoder2, method="qlora", mb=2, seq=1024, overrides=(("sliding_window", 256),)),
        _case(starcoder2, precision="bf16", mb=2, seq=1024, overrides=(("sliding_window", 256),)),
        *_granite_cases(),
        *_smollm3_cases(),
        *_olmo2_cases(),
        *_glm4_cases(),
        *_gemma3_cases(),
        *_cohere_cases(),
        *_cohere2_cases(),
    ]


def _granite_cases() -> list[Case]:
    granite = config_file("ibm-granite/granite-3.0-2b-base")
    return [
        _case(granite, precision="bf16", mb=4, seq=1024),
        _case(granite, method="lora", targets=("all-linear",), recompute="full", mb=4, seq=1024),
        _case(granite, precision="bf16", tp=2, mb=4, seq=1024),
        _case(granite, method="qlora", mb=2, seq=1024),
        _case(granite, precision="bf16", attention="eager", mb=2, seq=1024),
    ]


def _smollm3_cases() -> list[Case]:
    smollm3 = config_file("HuggingFaceTB/SmolLM3-3B")
    nope_second, nope_both = (("no_rope_layers", [1, 0]),), (("no_rope_layers", [0, 0]),)
    return [
        _case(smollm3, precision="bf16", mb=4, seq=1024, overrides=nope_second),
        _case(smollm3, mb=2, seq=1024, overrides=nope_both),
        _case(smollm3, precision="bf16", method="lora", mb=4, seq=1024, overrides=nope_both),
        _case(smollm3, precision="bf16", tp=2, mb=4, seq=1024, overrides=nope_second),
        _case(smollm3, method="qlora", recompute="full", mb=4, seq=1024, overrides=nope_second),
    ]


def full_matrix() -> list[Case]:
    """The benchmark matrix: the fast cases plus full-depth models up to 7B-class, over
    precision x method x recomputation x micro-batch x sequence x tensor parallelism."""
    cases = list(fast_cases())
    full = dict(layers=None)
    for precision in ("bf16", "bf16-mixed"):
        for recompute in ("none", "full"):
            cases.append(_case("meta-llama/Llama-3.2-1B", precision=precision, recompute=recompute, mb=4, seq=1024, **full))
    cases += [
        _case("meta-llama/Llama-3.2-1B", precision="fp32", mb=1, seq=1024, **full),
        _case("meta-llama/Llama-3.2-1B", precision="bf16", tp=2, mb=4, seq=2048, **full),
        _case("meta-llama/Llama-3.2-1B", precision="bf16", tp=4, mb=4, seq=2048, **full),
        _case("meta-llama/Llama-3.2-1B", precision="bf16", attention="eager", mb=1, seq=1024, **full),
        _case("meta-llama/Llama-3.2-1B", method="lora", targets=("all-linear",), mb=4, seq=2048, **full),
        _case("meta-llama/Llama-3.2-1B", precision="bf16", optimizer="adamw-fused", mb=2, seq=2048, **full),
        _case("meta-llama/Llama-3.2-1B", precision="bf16", optimizer="sgd", mb=2, seq=2048, **full),
        _case("meta-llama/Llama-3.2-3B", precision="bf16", mb=2, seq=2048, **full),
        _case("meta-llama/Llama-3.2-3B", precision="bf16", method="lora", mb=4, seq=2048, **full),
        _case("meta-llama/Llama-2-7b-hf", precision="bf16", method="lora", mb=1, seq=2048, **full),
        _case("meta-llama/Llama-2-7b-hf", precision="bf16", method="lora", recompute="full", mb=4, seq=2048, **full),
        _case("meta-llama/Llama-2-7b-hf", precision="bf16", method="qlora", mb=1, seq=2048, **full),
        _case("meta-llama/Llama-2-7b-hf", precision="bf16", tp=4, mb=1, seq=2048, **full),
        _case("mistralai/Mistral-7B-v0.1", precision="bf16", method="lora", mb=2, seq=2048, **full),
        _case("mistralai/Mistral-7B-v0.1", precision="bf16", recompute="full", tp=2, mb=2, seq=4096, **full),
        _case("mistralai/Mistral-7B-v0.1", precision="bf16", mb=1, seq=6144),  # longer than its 4096 window
        _case("Qwen/Qwen2.5-7B", precision="bf16", method="lora", mb=1, seq=2048, **full),
        _case("Qwen/Qwen2.5-0.5B", precision="bf16", mb=8, seq=1024, **full),
        _case("Qwen/Qwen2.5-0.5B", mb=4, seq=2048, **full),
        _case("Qwen/Qwen2.5-1.5B", precision="bf16", recompute="full", mb=8, seq=2048, **full),
        _case("Qwen/Qwen3-1.7B", precision="bf16", mb=2, seq=2048, **full),
        _case("openai-community/gpt2", precision="fp32", mb=8, seq=1024, **full),
        _case("openai-community/gpt2-medium", mb=8, seq=1024, **full),
        _case("openai-community/gpt2-large", precision="bf16", method="lora", mb=4, seq=1024, **full),
        _case("EleutherAI/pythia-410m", mb=8, seq=2048, **full),
        _case("EleutherAI/pythia-1b", precision="bf16", method="lora", mb=4, seq=2048, **full),
        _case("EleutherAI/pythia-1.4b", precision="bf16", recompute="full", mb=8, seq=2048, **full),
        _case("facebook/opt-350m", precision="bf16", mb=8, seq=2048, **full),
        _case("facebook/opt-1.3b", mb=4, seq=2048, **full),
        _case("microsoft/phi-1_5", precision="bf16", mb=4, seq=2048, **full),
        _case("microsoft/phi-2", precision="bf16", method="lora", mb=4, seq=2048, **full),
        _case("microsoft/Phi-3-mini-4k-instruct", precision="bf16", method="lora", mb=2, seq=4096, **full),
        _case("google/gemma-2b", precision="bf16", mb=2, seq=2048, **full),
        _case("google/gemma-2-2b", precision="bf16", method="lora", mb=2, seq=2048, **full),
        _case("stabilityai/stablelm-2-1_6b", precision="bf16", mb=4, seq=2048, **full),
        _case("stabilityai/stablelm-base-alpha-3b", precision="bf16", method="lora", mb=2, seq=2048, **full),
        _case("bigscience/bloom-560m", precision="bf16", mb=4, seq=2048, **full),
        _case("EleutherAI/gpt-neo-1.3B", precision="bf16", mb=2, seq=2048, **full),
        _case("EleutherAI/gpt-j-6b", precision="bf16", method="lora", mb=1, seq=2048, **full),
        _case("tiiuae/falcon-7b", precision="bf16", method="lora", mb=1, seq=2048, **full),
        _case("mistralai/Mixtral-8x7B-v0.1", precision="bf16", layers=4, overrides=SMALL_MOE, mb=4, seq=2048),
        _case("mistralai/Mixtral-8x7B-v0.1", layers=4, overrides=SMALL_MOE, mb=2, seq=2048),
        _case("Qwen/Qwen1.5-MoE-A2.7B", precision="bf16", layers=4, overrides=SMALL_QWEN_MOE, mb=4, seq=2048),
    ]
    return cases


def _olmo2_cases() -> list[Case]:
    """OLMo 2: no tensor parallelism (its q/k norms span every head, which a head split cuts)."""
    olmo2 = config_file("allenai/OLMo-2-0425-1B")
    return [
        _case(olmo2, precision="bf16", mb=4, seq=1024),
        _case(olmo2, mb=4, seq=1024),
        _case(olmo2, precision="bf16", method="lora", targets=("all-linear",), mb=4, seq=1024),
        _case(olmo2, method="qlora", mb=2, seq=1024),
        _case(olmo2, precision="bf16", recompute="full", mb=4, seq=1024),
        _case(olmo2, method="lora", recompute="full", mb=2, seq=1024),
    ]


def _glm4_cases() -> list[Case]:
    """GLM-4: a 32k vocabulary where the published 151k would put every full fine-tuning peak in the
    optimizer step of a two-layer model."""
    glm4, small_vocab = config_file("THUDM/GLM-4-9B-0414"), (("vocab_size", 32768), ("pad_token_id", 0))
    return [
        _case(glm4, precision="bf16", mb=4, seq=1024, overrides=small_vocab),
        _case(glm4, method="lora", targets=("all-linear",), mb=4, seq=1024),
        _case(glm4, method="qlora", mb=2, seq=1024),
        _case(glm4, precision="bf16", recompute="full", mb=4, seq=1024),
        _case(glm4, precision="bf16", tp=2, mb=4, seq=1024, overrides=small_vocab),
    ]


def _gemma3_cases() -> list[Case]:
    """Gemma 3 (text-only 1B, and the multimodal 4B config's language model), with a 32k vocabulary
    (the published 262k one would leave activations under the term floor of a two-layer model)."""
    gemma3_1b, gemma3_4b, small_vocab = (config_file("google/gemma-3-1b-pt"), config_file("google/gemma-3-4b-pt"),
                                         ("vocab_size", 32768))
    return [
        _case(gemma3_1b, precision="bf16", mb=4, seq=1024, overrides=(small_vocab,)),
        _case(gemma3_1b, mb=4, seq=1024, overrides=(small_vocab, ("sliding_window_pattern", 2))),
        _case(gemma3_1b, precision="bf16", method="lora", targets=("all-linear",), mb=4, seq=1024,
              overrides=(small_vocab,)),
        _case(gemma3_1b, method="lora", recompute="full", mb=4, seq=1024, overrides=(small_vocab,)),
        _case(gemma3_4b, precision="bf16", mb=2, seq=1024, overrides=(small_vocab,)),
        _case(gemma3_4b, method="qlora", mb=2, seq=1024, overrides=(small_vocab, ("sliding_window", 512))),
        _case(gemma3_4b, precision="bf16", tp=2, mb=2, seq=1024, overrides=(small_vocab,)),
    ]


def _cohere_cases() -> list[Case]:
    """Cohere: Aya 23 8B, and Command R+ (q/k norms) narrowed to Aya's width so it traces in seconds."""
    aya, command_r_plus, small_vocab = (config_file("CohereForAI/aya-23-8B"),
                                        config_file("CohereForAI/c4ai-command-r-plus"), ("vocab_size", 32768))
    narrow = (("hidden_size", 4096), ("num_attention_heads", 32), ("intermediate_size", 11264), small_vocab)
    return [
        _case(aya, precision="bf16", mb=4, seq=1024, overrides=(small_vocab,)),
        _case(aya, mb=4, seq=1024, overrides=(small_vocab,)),
        _case(aya, precision="bf16", method="lora", mb=4, seq=1024),
        _case(aya, precision="bf16", tp=2, mb=4, seq=1024, overrides=(small_vocab,)),
        _case(aya, method="qlora", recompute="full", mb=4, seq=1024),
        _case(command_r_plus, precision="bf16", mb=4, seq=1024, overrides=narrow),
        _case(command_r_plus, mb=4, seq=1024, overrides=narrow),
        _case(command_r_plus, precision="bf16", method="lora", targets=("all-linear",), mb=4, seq=1024,
              overrides=narrow),
    ]


def _cohere2_cases() -> list[Case]:
    command_r7b, small_vocab = config_file("CohereForAI/c4ai-command-r7b-12-2024"), ("vocab_size", 32768)
    window = ("sliding_window", 512)
    return [
        _case(command_r7b, precision="bf16", mb=4, seq=1024,
              overrides=(small_vocab, window, ("sliding_window_pattern", 2))),
        _case(command_r7b, method="qlora", mb=2, seq=1024, overrides=(window,)),
        _case(command_r7b, precision="bf16", tp=2, mb=4, seq=1024, overrides=(small_vocab, window)),
        _case(command_r7b, method="lora", targets=("all-linear",), recompute="full", mb=4, seq=1024,
              overrides=(small_vocab,)),
    ]


# DeepSeek shrunk: MLA (kv_lora_rank 128, q/k heads of 64 + 32 rotary, v 64 wide), 16 routed experts
# top-4 beside 2 shared (V2-Lite) or 1 (V3), a dense first layer; a 4k vocabulary keeps the layers'
# activations well above the term floor beside the logits.
SMALL_DEEPSEEK = (("hidden_size", 512), ("intermediate_size", 1024), ("moe_intermediate_size", 256),
                  ("num_attention_heads", 8), ("num_key_value_heads", 8), ("n_routed_experts", 16),
                  ("num_experts_per_tok", 4), ("kv_lora_rank", 128), ("qk_nope_head_dim", 64),
                  ("qk_rope_head_dim", 32), ("v_head_dim", 64), ("vocab_size", 4096), ("bos_token_id", None),
                  ("eos_token_id", None))
# V3: the low-rank q (q_lora_rank), sigmoid routing limited to 2 of 4 expert groups, one dense layer
SMALL_DEEPSEEK_V3 = SMALL_DEEPSEEK + (("q_lora_rank", 192), ("n_group", 4), ("topk_group", 2),
                                      ("first_k_dense_replace", 1))


def _deepseek_cases() -> list[Case]:
    """DeepSeek-V2-Lite and V3 shrunk to three layers (a dense first layer, then MoE), sdpa and eager."""
    v2, v3 = "deepseek-ai/DeepSeek-V2-Lite", "deepseek-ai/DeepSeek-V3"
    small_v2, small_v3 = dict(layers=3, overrides=SMALL_DEEPSEEK), dict(layers=3, overrides=SMALL_DEEPSEEK_V3)
    grouped = SMALL_DEEPSEEK + (("topk_method", "group_limited_greedy"), ("n_group", 4), ("topk_group", 2))
    vocab_32k = (("vocab_size", 32000),)
    return [
        _case(v2, precision="bf16", mb=2, seq=1024, **small_v2),
        _case(v2, mb=2, seq=1024, **small_v2),
        _case(v2, precision="bf16", attention="eager", mb=2, seq=1024, **small_v2),
        _case(v2, method="lora", targets=("all-linear",), mb=2, seq=1024, **small_v2),
        _case(v2, method="qlora", mb=2, seq=1024, **small_v2),
        _case(v2, precision="bf16", method="lora", targets=("q", "o"), mb=2, seq=1024, layers=3, overrides=grouped),
        _case(v2, precision="bf16", method="lora", recompute="full", mb=4, seq=1024, layers=4,
              overrides=SMALL_DEEPSEEK + vocab_32k + (("first_k_dense_replace", 2),)),
        _case(v3, precision="bf16", mb=2, seq=1024, **small_v3),
        _case(v3, mb=2, seq=1024, **small_v3),
        _case(v3, attention="eager", mb=1, seq=1024, **small_v3),
        _case(v3, method="lora", targets=("all-linear",), mb=2, seq=1024, **small_v3),
        _case(v3, precision="bf16", method="qlora", mb=2, seq=1024, **small_v3),
        _case(v3, precision="bf16", method="lora", recompute="full", mb=4, seq=1024, layers=4,
              overrides=SMALL_DEEPSEEK_V3),
        _case(v3, recompute="full", mb=2, seq=1024, layers=4, overrides=SMALL_DEEPSEEK_V3 + vocab_32k),
    ]


# gpt-oss shrunk: 8 experts top-2, GQA, a 32k vocabulary; the layers keep their sliding (window 128) /
# full alternation, and every sequence is longer than the window.
GPT_OSS = "openai/gpt-oss-20b"
SMALL_GPT_OSS = (("hidden_size", 512), ("intermediate_size", 512), ("num_attention_heads", 8),
                 ("num_key_value_heads", 2), ("num_local_experts", 8), ("num_experts_per_tok", 2),
                 ("vocab_size", 32000), ("pad_token_id", 0), ("eos_token_id", 1))


def _oss_llama4_cases() -> list[Case]:
    """gpt-oss (eager attention with sinks, biased clamped-SwiGLU experts) and Llama 4 (interleaved
    dense and MoE layers, NoPE and chunked-attention layers), shrunk from the catalog configs."""
    oss = dict(overrides=SMALL_GPT_OSS)
    small_vocab = tuple(kv for kv in SMALL_GPT_OSS if kv[0] != "vocab_size") + (("vocab_size", 4096),)
    return [
        _case(GPT_OSS, precision="bf16", mb=4, seq=1024, **oss),
        _case(GPT_OSS, mb=2, seq=1024, **oss),
        _case(GPT_OSS, method="lora", targets=("all-linear",), mb=4, seq=512, **oss),
        _case(GPT_OSS, precision="bf16", method="qlora", mb=2, seq=1024, **oss),
        _case(GPT_OSS, precision="bf16", recompute="full", mb=4, seq=1024, layers=4, **oss),
        _case(GPT_OSS, method="lora", recompute="full", mb=2, seq=1024, **oss),
        _case(GPT_OSS, method="qlora", mb=2, seq=1024, layers=4, overrides=small_vocab),
        _case(GPT_OSS, precision="bf16", tp=2, mb=2, seq=1024, **oss),
        *_llama4_cases(),
    ]


# Llama 4 shrunk: 4 experts, GQA, a 32k vocabulary, chunks of 256 so that the RoPE layers attend in
# chunks; four layers keep the pattern (RoPE, RoPE, RoPE, NoPE). Scout's layers are all MoE, so it is
# given Maverick's interleaving (dense, MoE, dense, MoE); Maverick has no q/k norm.
LLAMA4_SCOUT, LLAMA4_MAVERICK = "meta-llama/Llama-4-Scout-17B-16E", "meta-llama/Llama-4-Maverick-17B-128E"
SMALL_LLAMA4 = (("hidden_size", 512), ("intermediate_size", 512), ("intermediate_size_mlp", 1024),
                ("num_attention_heads", 8), ("num_key_value_heads", 2), ("head_dim", 64), ("num_local_experts", 4),
                ("vocab_size", 32000), ("pad_token_id", 0), ("bos_token_id", 1), ("eos_token_id", 2),
                ("attention_chunk_size", 256))


def _llama4_cases() -> list[Case]:
    scout = dict(layers=4, overrides=SMALL_LLAMA4 + (("interleave_moe_layer_step", 2),))
    maverick = dict(layers=4, overrides=SMALL_LLAMA4 + (("num_local_experts", 8),))
    small_vocab = dict(layers=4, overrides=SMALL_LLAMA4 + (("interleave_moe_layer_step", 2), ("vocab_size", 4096)))
    return [
        _case(LLAMA4_SCOUT, precision="bf16", mb=2, seq=512, **scout),
        _case(LLAMA4_SCOUT, mb=2, seq=512, **scout),
        _case(LLAMA4_SCOUT, method="lora", targets=("all-linear",), mb=2, seq=512, **scout),
        _case(LLAMA4_SCOUT, precision="bf16", method="qlora", mb=2, seq=512, **scout),
        _case(LLAMA4_SCOUT, precision="bf16", recompute="full", mb=4, seq=512, **scout),
        _case(LLAMA4_SCOUT, precision="bf16", mb=1, seq=2048, **small_vocab),
        _case(LLAMA4_SCOUT, precision="bf16", tp=2, mb=2, seq=512, **scout),
        _case(LLAMA4_MAVERICK, mb=2, seq=512, **maverick),
        _case(LLAMA4_MAVERICK, method="qlora", mb=2, seq=1024, **maverick),
        _case(LLAMA4_MAVERICK, precision="bf16", method="lora", targets=("all-linear",), recompute="full", mb=2,
              seq=1024, **maverick),
    ]

"""Build the real Hugging Face model of one training rank, on fake tensors.

What is built, by training method (matching MARP's weight accounting):
  * full: every parameter in the precision's storage dtype (fp32 masters for fp32 and *-mixed,
    bf16 for bf16);
  * LoRA: the frozen base in 16 bits (the compute dtype: bf16, or fp16 for fp16-mixed; fp32 for
    fp32 training), adapters (peft, lora_dropout 0) in the storage dtype;
  * QLoRA: as LoRA, with every frozen projection except the LM head replaced by an NF4 stand-in
    (see qlora.py) that dequantises to the compute dtype.
Tensor parallelism builds one rank's shard: heads, KV heads (at least one), dense intermediate and
vocab sizes divided by tp with head_dim pinned, for the families of the rule table; routed experts
are then split by expert as the worker splits them (trace.experts).
"""

from __future__ import annotations

import copy
import math
import re
from contextlib import ExitStack, contextmanager

import torch
from torch import nn

from frenzy.core.generic import LAYER_COUNT_KEYS, lora_target_of, per_layer_keys, per_layer_maps, text_config
from frenzy.core.tensor_parallel import TP_RULES
from frenzy.core.training import Attention, Method, Precision, TrainingConfig
from frenzy.memory.trace.experts import routed_width_key
from frenzy.memory.trace.patches import fake_parameter_conversion, fake_truncated_normal, setattr_during
from frenzy.train.layers import decoder_layers

# Normalised projection names -> module-name suffixes peft matches ("a.b" matches "...a.b").
_LLAMA = {"q": ["q_proj"], "k": ["k_proj"], "v": ["v_proj"], "o": ["o_proj"],
          "gate": ["gate_proj"], "up": ["up_proj"], "down": ["down_proj"]}
_FUSED_QKV = {"query_key_value"}  # one module answers to q, k and v
LORA_MODULES: dict[str, dict[str, list[str]]] = {
    **{family: _LLAMA for family in ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3",
                                     "qwen3_moe", "olmoe", "phimoe", "gemma", "gemma2", "stablelm",
                                     "granite", "smollm3", "olmo2", "gemma3_text", "gemma3", "cohere",
                                     "cohere2")},
    "gpt2": {"q": ["c_attn"], "k": ["c_attn"], "v": ["c_attn"], "o": ["attn.c_proj"],
             "up": ["c_fc"], "down": ["mlp.c_proj"]},
    "gpt_neox": {"q": ["query_key_value"], "k": ["query_key_value"], "v": ["query_key_value"],
                 "o": ["attention.dense"], "up": ["dense_h_to_4h"], "down": ["dense_4h_to_h"]},
    "opt": {"q": ["q_proj"], "k": ["k_proj"], "v": ["v_proj"], "o": ["out_proj"], "up": ["fc1"], "down": ["fc2"]},
    "phi": {"q": ["q_proj"], "k": ["k_proj"], "v": ["v_proj"], "o": ["dense"], "up": ["fc1"], "down": ["fc2"]},
    "phi3": {"q": ["qkv_proj"], "k": ["qkv_proj"], "v": ["qkv_proj"], "o": ["o_proj"],
             "gate": ["gate_up_proj"], "up": ["gate_up_proj"], "down": ["down_proj"]},
    "falcon": {"q": ["query_key_value"], "k": ["query_key_value"], "v": ["query_key_value"],
               "o": ["self_attention.dense"], "up": ["dense_h_to_4h"], "down": ["dense_4h_to_h"]},
    "bloom": {"q": ["query_key_value"], "k": ["query_key_value"], "v": ["query_key_value"],
              "o": ["self_attention.dense"], "up": ["dense_h_to_4h"], "down": ["dense_4h_to_h"]},
    "gptj": {"q": ["q_proj"], "k": ["k_proj"], "v": ["v_proj"], "o": ["out_proj"], "up": ["fc_in"], "down": ["fc_out"]},
    "gpt_neo": {"q": ["q_proj"], "k": ["k_proj"], "v": ["v_proj"], "o": ["out_proj"],
                "up": ["c_fc"], "down": ["mlp.c_proj"]},
    "starcoder2": {"q": ["q_proj"], "k": ["k_proj"], "v": ["v_proj"], "o": ["o_proj"],
                   "up": ["c_fc"], "down": ["c_proj"]},
    "glm4": {"q": ["q_proj"], "k": ["k_proj"], "v": ["v_proj"], "o": ["o_proj"],
             "gate": ["gate_up_proj"], "up": ["gate_up_proj"], "down": ["down_proj"]},
    "gpt_oss": {"q": ["q_proj"], "k": ["k_proj"], "v": ["v_proj"], "o": ["o_proj"]},  # experts: fused parameters
}
# DeepSeek's MLA: q direct or low-rank (q_a, q_b), k and v from one latent (kv_a, kv_b). Their routed
# experts are fused 3-D parameters that peft does not match, but unlike _FUSED_EXPERTS the shared
# experts and the dense first layers carry gate/up/down nn.Linear modules that adapters reach.
_MLA = {"q": ["q_proj", "q_a_proj", "q_b_proj"], "k": ["kv_a_proj_with_mqa", "kv_b_proj"],
        "v": ["kv_a_proj_with_mqa", "kv_b_proj"], "o": ["o_proj"],
        "gate": ["gate_proj"], "up": ["up_proj"], "down": ["down_proj"]}
LORA_MODULES.update({family: _MLA for family in ("deepseek_v2", "deepseek_v3")})
# Families whose expert MLPs are fused 3-D parameters in transformers 5 (not nn.Linear): LoRA can
# only reach their attention (and shared-expert) projections.
_FUSED_EXPERTS = {"mixtral", "qwen3_moe", "olmoe", "phimoe"}
_FUSED_EXPERTS.add("gpt_oss")
# The families whose one-rank shard the tracer builds: the split rules the worker runs (and those it
# leaves out with a reason), one table (frenzy.core.tensor_parallel.TP_RULES).
TP_FAMILIES = tuple(TP_RULES)
_TP_WIDTHS = ("intermediate_size_mlp",)  # Llama 4's dense layers


def model_type(cfg: dict) -> str:
    from transformers import CONFIG_MAPPING

    kind = cfg.get("model_type")
    if kind not in CONFIG_MAPPING:
        archs = ", ".join(cfg.get("architectures", [])) or "unknown architecture"
        raise ValueError(f"model_type {kind!r} ({archs}) has no model class in transformers; the trace needs "
                         "one (Qwen v1 needs trust_remote_code and cannot be traced)")
    return kind


def lora_target_modules(kind: str, targets: frozenset[str]) -> list[str]:
    """HF module-name suffixes for normalised targets. A fused module (c_attn, query_key_value,
    gate_up_proj) is adapted whole when any projection it computes is a target."""
    table = LORA_MODULES.get(kind)
    if table is None:
        raise ValueError(f"no LoRA module names known for model_type '{kind}'; "
                         f"known: {', '.join(sorted(LORA_MODULES))}")
    if kind in _FUSED_EXPERTS:
        targets = targets - {"gate", "up", "down"}
    names = sorted({name for target in targets for name in table.get(target, [])})
    if not names:
        raise ValueError(f"LoRA targets {sorted(targets)} select no module of a {kind} model")
    return names


def generic_lora_modules(model: nn.Module, targets: frozenset[str]) -> list[str]:
    """Module-name suffixes of a family without a LORA_MODULES entry: the decoder layers' projections
    whose names answer to `targets` (frenzy.core.generic.lora_target_of)."""
    names = sorted({name.rsplit(".", 1)[-1] for name, module in decoder_layers(model).named_modules()
                    if isinstance(module, nn.Linear)
                    and set(lora_target_of(name.rsplit(".", 1)[-1]).split(",")) & targets})
    if not names:
        raise ValueError(f"LoRA targets {sorted(targets)} select no projection of this model; use all-linear")
    return names


# Families with learned position embeddings: a longer sequence has no rows on a GPU (an index
# error there), while fake tensors would silently run it.
_LEARNED_POSITIONS = {"gpt2": "n_positions", "gpt_neo": "max_position_embeddings", "opt": "max_position_embeddings"}


# Multimodal model types whose `text_config` holds the causal language model that is trained.
def language_model_config(cfg: dict) -> dict:
    """The causal language model's config: a multimodal config's text_config (the vision tower does
    not take part in a causal-LM training step; frenzy.core.generic.text_config), with the sizes
    shard_config reads filled from transformers' defaults (Hub configs state only what differs)."""
    text = text_config(cfg)
    if text is cfg:
        return cfg
    from transformers import AutoConfig

    defaults = AutoConfig.for_model(text["model_type"])
    for key in ("vocab_size", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
                "head_dim"):
        if getattr(defaults, key, None) is not None:
            text.setdefault(key, getattr(defaults, key))
    return text


def check_sequence(cfg: dict, seq_len: int) -> None:
    key = _LEARNED_POSITIONS.get(cfg.get("model_type"))
    if key and cfg.get(key) and seq_len > cfg[key]:
        raise ValueError(f"seq_len {seq_len} exceeds the {cfg[key]} learned positions of this "
                         f"{cfg['model_type']} model; use seq_len <= {cfg[key]}")


def shard_config(cfg: dict, tp: int) -> dict:
    """One tensor-parallel rank's config: heads, KV heads, dense intermediate and vocab divided by tp;
    routed experts keep their width (split by expert after the build: trace.experts)."""
    if tp == 1:
        return dict(cfg)
    kind = model_type(cfg)
    if kind not in TP_FAMILIES:
        raise ValueError(f"tensor-parallel tracing supports llama-style families ({', '.join(TP_FAMILIES)}), "
                         f"not '{kind}'; trace with tp=1")
    out = dict(cfg)
    heads = cfg["num_attention_heads"]
    if heads % tp:
        raise ValueError(f"{heads} attention heads do not split over tp={tp}")
    out["head_dim"] = cfg.get("head_dim") or cfg["hidden_size"] // heads
    out["num_attention_heads"] = heads // tp
    out["num_key_value_heads"] = max(1, (cfg.get("num_key_value_heads") or heads) // tp)
    routed = routed_width_key(cfg, kind)  # split by expert, not by width (trace.experts)
    for key in ("intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size", *_TP_WIDTHS):
        if cfg.get(key) and key != routed:
            if cfg[key] % tp:
                raise ValueError(f"{key}={cfg[key]} does not split over tp={tp}")
            out[key] = cfg[key] // tp
    out["vocab_size"] = math.ceil(cfg["vocab_size"] / tp)
    if (cfg.get("pad_token_id") or 0) >= out["vocab_size"]:
        out["pad_token_id"] = None  # the padding row lives on another rank's shard
    return out


def param_dtype(precision: Precision) -> torch.dtype:
    return torch.bfloat16 if precision is Precision.BF16 else torch.float32


def compute_dtype(precision: Precision) -> torch.dtype:
    return {Precision.FP32: torch.float32, Precision.FP16_MIXED: torch.float16}.get(precision, torch.bfloat16)


def base_dtype(training: TrainingConfig) -> torch.dtype:
    """Storage dtype of the model as loaded: frozen bases are 16-bit (fp32 when training in fp32)."""
    if training.method is Method.FULL:
        return param_dtype(training.precision)
    return compute_dtype(training.precision)


def attn_implementation(attention: Attention) -> str:
    return "eager" if attention is Attention.EAGER else "sdpa"


def hf_config(cfg: dict):
    """transformers config object for a config.json dict (bookkeeping keys dropped, no KV cache)."""
    kwargs = {k: v for k, v in cfg.items()
              if not k.startswith("_") and k not in ("model_type", "torch_dtype", "dtype", "transformers_version")}
    kwargs["use_cache"] = False
    return config_for_model(model_type(cfg), kwargs)


def config_for_model(kind: str, values: dict):
    """`AutoConfig.for_model(kind, **values)`, where a JSON integer given for a field transformers
    declares a float is read as that float: JSON writers print 1.0 as 1, and transformers' strict
    fields refuse it (DBRX's published config has `moe_normalize_expert_weights: 1`)."""
    from transformers import AutoConfig

    values = copy.deepcopy(values)
    while True:
        try:
            return AutoConfig.for_model(kind, **values)
        except Exception as exc:  # noqa: BLE001 - huggingface_hub's StrictDataclassFieldValidationError
            found = re.match(r"Validation error for field '([^']+)'", str(exc))
            if not found or "expected float, got int" not in str(exc) or not _int_to_float(values, found[1]):
                raise


def _int_to_float(values: dict, key: str) -> bool:
    """Make the integer `key` (at any depth: DBRX's ffn_config) a float; whether one was found."""
    if type(values.get(key)) is int:
        values[key] = float(values[key])
        return True
    return any(_int_to_float(value, key) for value in values.values() if isinstance(value, dict))


def build_model(cfg: dict, training: TrainingConfig, keep_layers: list[int] | None = None,
                whole_prefix: bool = False) -> tuple[nn.Module, list[str]]:
    """The model (call inside FakeTensorMode), with LoRA/QLoRA applied, in train mode; and notes.
    `keep_layers`: build only these decoder layers (a reduced-depth copy, in model order), or with
    `whole_prefix` every layer up to the last of them."""
    notes = []
    if keep_layers:
        cfg = _truncated(cfg, max(keep_layers) + 1)
    config = hf_config(cfg)
    implementation = attn_implementation(training.attention)
    if implementation == "sdpa" and not _supports_sdpa(config):
        # What transformers itself picks for such a model when no implementation is requested.
        implementation = "eager"
        notes.append(f"{cfg['model_type']} has no SDPA attention in transformers: traced with eager attention")
    config._attn_implementation = implementation
    with fake_parameter_conversion(), fake_truncated_normal():
        model = causal_lm_class(config)._from_config(config, dtype=base_dtype(training),
                                                     attn_implementation=implementation)
    if keep_layers and not whole_prefix:
        _keep_only(model, keep_layers)
    if training.method is not Method.FULL:
        model = _apply_lora(model, cfg, training)
    model.train()
    return model, notes


def _truncated(cfg: dict, layers: int) -> dict:
    """The config of the model's first `layers` layers (per-layer lists cut to match): every layer
    keeps the kind the full model gives it, since kinds follow the layer index."""
    out = dict(cfg)
    for key in per_layer_keys(cfg):
        out[key] = cfg[key][:layers]
    for key in per_layer_maps(cfg):
        out[key] = {index: value for index, value in cfg[key].items() if int(index) < layers}
    for key in LAYER_COUNT_KEYS:
        if key in cfg:
            out[key] = layers
    return out


def _keep_only(model: nn.Module, keep: list[int]) -> None:
    """Drop every decoder layer but `keep`; the model's per-layer config entries follow (HF forwards
    index `config.layer_types[i]` by position)."""
    layers = decoder_layers(model)
    parent, attribute = next((m, name) for m in model.modules() for name, child in m.named_children()
                             if child is layers)
    setattr(parent, attribute, nn.ModuleList([layers[i] for i in keep]))
    config = model.config
    settings = config.to_dict()
    per_layer = {k: v for k, v in settings.items() if isinstance(v, list) and len(v) == len(layers)}
    for key, values in per_layer.items():
        setattr(config, key, [values[i] for i in keep])
    for key in per_layer_maps(settings, len(layers)):  # renumbered to the kept layers' new positions
        by_index = {int(index): value for index, value in settings[key].items()}
        setattr(config, key, {position: by_index[i] for position, i in enumerate(keep) if i in by_index})
    for key in LAYER_COUNT_KEYS:
        if hasattr(config, key) and getattr(config, key) == len(layers):
            setattr(config, key, len(keep))


def causal_lm_class(config):
    """transformers' causal-LM class for a config object: the one AutoModelForCausalLM maps its type
    to, or else the one built on it (Emu3's and Mllama's text configs, whose own model_type no auto
    mapping names, are their ...ForCausalLM's config class). ValueError if there is none."""
    import importlib

    from transformers import AutoModelForCausalLM

    mapping = AutoModelForCausalLM._model_mapping
    if type(config) in mapping:
        return mapping[type(config)]
    # the family's own modeling module, beside its configuration module (importing every model to
    # search the whole mapping would take many seconds)
    try:
        module = vars(importlib.import_module(type(config).__module__.replace(".configuration_", ".modeling_")))
    except ImportError:
        module = {}
    found = next((model for name, model in module.items() if name.endswith("ForCausalLM")
                  and getattr(model, "config_class", None) is type(config)), None)
    if found is None:
        raise ValueError(f"model_type '{config.model_type}' has no causal-LM class in transformers; "
                         "the trace runs causal language models only")
    return found


def _supports_sdpa(config) -> bool:
    return bool(getattr(causal_lm_class(config), "_supports_sdpa", False))


def _replace_module(self, parent, child_name, new_module, child) -> None:
    setattr(parent, child_name, new_module)  # peft's version then moves it to the device: not needed


@contextmanager
def projections_only():
    """peft re-targets v4-era names (down_proj ...) at transformers 5's fused expert tensors; Frenzy
    adapts nn.Linear projections only (what MARP counts), so that conversion is left out while
    adapters are added (by the tracer and by the training worker alike)."""
    try:
        from peft.utils import transformers_weight_conversion
    except ImportError:  # a peft without transformers-5 conversions
        yield
        return
    with setattr_during(transformers_weight_conversion, "convert_peft_config_for_transformers",
                        lambda *args, **kwargs: None):
        yield


def lora_modules(model: nn.Module, kind: str, targets: frozenset[str]) -> list[str]:
    """peft target module names for normalised targets: the family's table, else the projections
    whose names answer to them (generic_lora_modules)."""
    if kind in LORA_MODULES:
        return lora_target_modules(kind, targets)
    return generic_lora_modules(model, targets)


def _apply_lora(model: nn.Module, cfg: dict, training: TrainingConfig) -> nn.Module:
    from peft import LoraConfig, get_peft_model
    from peft.tuners.lora.model import LoraModel
    from peft.tuners.tuners_utils import BaseTunerLayer

    from frenzy.memory.trace.qlora import quantize_base_layers

    modules = lora_modules(model, model_type(cfg), training.trainable_targets)
    config = LoraConfig(r=training.lora_rank, target_modules=modules, lora_dropout=0.0, task_type="CAUSAL_LM",
                        fan_in_fan_out=model_type(cfg) == "gpt2")  # GPT-2's Conv1D stores weights in x out
    # peft moves each adapter to its base layer's device and dtype with Module.to(), which swaps
    # tensors and fails on fake parameters (FakeTensorMode's memo holds weak references to some).
    # Everything is on one fake device, so only the dtype matters; it is set below through .data.
    with ExitStack() as stack:
        stack.enter_context(setattr_during(BaseTunerLayer, "_move_adapter_to_device_of_base_layer",
                                           lambda self, *args, **kwargs: None))
        stack.enter_context(setattr_during(LoraModel, "_replace_module", _replace_module))
        stack.enter_context(projections_only())
        model = get_peft_model(model, config, autocast_adapter_dtype=False)
    adapter_dtype = param_dtype(training.precision)
    for param in model.parameters():
        if param.requires_grad and param.dtype != adapter_dtype:
            param.data = param.data.to(adapter_dtype)
    if training.method is Method.QLORA:
        quantize_base_layers(model, compute_dtype(training.precision))
    return model

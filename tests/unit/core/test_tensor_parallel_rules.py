"""The tensor-parallel rule table against the models transformers builds, and what the planner is told
about tp / sequence-parallel plans (core.worker_support)."""

import json

import pytest

from frenzy.core.hf_config import load_model
from frenzy.core.job import JobSpec
from frenzy.core.plan import ParallelPlan
from frenzy.core.tensor_parallel import TP_RULES, worker_tp_families
from frenzy.core.worker_support import unsupported_reason

SMALL = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             vocab_size=512, max_position_embeddings=256, head_dim=16)
MOE = dict(num_experts=4, num_local_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
           shared_expert_intermediate_size=64)


@pytest.mark.parametrize("family", sorted(worker_tp_families()))
def test_every_module_a_rule_names_is_a_module_transformers_builds(family):
    torch = pytest.importorskip("torch")
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(family, **SMALL, **(MOE if TP_RULES[family].experts else {}), pad_token_id=None,
                                  bos_token_id=None, eos_token_id=None)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    names = {name.split(".", 3)[-1] for name, _ in model.named_modules() if ".layers." in name}
    rule = TP_RULES[family]
    for module in (*rule.colwise, *rule.rowwise, rule.attention, rule.mlp, *([rule.experts] if rule.experts else [])):
        # a rule may name a module only some layers have (a dense MLP beside MoE blocks)
        if module.startswith("mlp.") and rule.experts:
            continue
        assert module in names, f"{family}: no {module} in its decoder layers"
    if rule.experts:
        assert rule.experts in names


def _job(tmp_path, seq_len=512, **config) -> JobSpec:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "rms_norm_eps": 1e-5,
                                **SMALL, **config}))
    return JobSpec(model=load_model(str(path)), seq_len=seq_len)


def test_planner_is_offered_tp_and_sp_plans_the_worker_runs(tmp_path):
    job = _job(tmp_path)
    assert unsupported_reason(job, ParallelPlan(tp=2, sequence_parallel=True)) is None
    assert unsupported_reason(job, ParallelPlan(tp=2)) is None
    assert "key/value heads do not split over tp=4" in unsupported_reason(job, ParallelPlan(tp=4))
    odd = _job(tmp_path, seq_len=511)
    assert "511" in unsupported_reason(odd, ParallelPlan(tp=2, sequence_parallel=True))


def test_families_without_a_worker_split_say_why(tmp_path):
    path = tmp_path / "gpt2.json"
    path.write_text(json.dumps({"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2, "vocab_size": 512,
                                "n_positions": 256}))
    gpt2 = JobSpec(model=load_model(str(path)), seq_len=128)
    assert "cannot tensor-parallelise gpt2" in unsupported_reason(gpt2, ParallelPlan(tp=2))
    assert "glm4" not in worker_tp_families() and "fused" in TP_RULES["glm4"].worker_reason

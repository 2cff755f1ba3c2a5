"""DeepSeek-V2 and V3 parsed by their formulas: parameter counts equal transformers' own module tree
(meta device), dense first layers included, and the published totals (V2-Lite 15.7B, V3 671B)."""

import pytest

from frenzy.core.hf_config import arch_from_config, load_config

VARIANTS = [
    ("deepseek-ai/DeepSeek-V3", {}),
    ("deepseek-ai/DeepSeek-V2-Lite", {}),
    # V2 with the low-rank q, group-limited routing, two dense layers and attention biases
    ("deepseek-ai/DeepSeek-V2-Lite", {"q_lora_rank": 384, "topk_method": "group_limited_greedy", "n_group": 8,
                                      "topk_group": 3, "first_k_dense_replace": 2, "attention_bias": True}),
    ("deepseek-ai/DeepSeek-V3", {"first_k_dense_replace": 0, "n_shared_experts": 2}),
]


def _arch(name, overrides):
    cfg, _ = load_config(name)
    return arch_from_config({**cfg, **overrides}, name), {**cfg, **overrides}


PUBLISHED = [("deepseek-ai/DeepSeek-V2-Lite", 15.7e9), ("deepseek-ai/DeepSeek-V3", 671e9)]  # model cards


@pytest.mark.parametrize(("name", "total"), PUBLISHED)
def test_counts_match_the_published_totals(name, total):
    arch, _ = _arch(name, {})
    assert arch.model_source == "formula"
    assert abs(arch.num_params - total) / total < 0.005


@pytest.mark.parametrize(("name", "overrides"), VARIANTS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(VARIANTS)])
def test_counts_equal_the_transformers_module_tree(name, overrides):
    torch = pytest.importorskip("torch", reason="needs the 'trace' extra")
    transformers = pytest.importorskip("transformers", reason="needs the 'trace' extra")
    arch, cfg = _arch(name, overrides)
    cfg = {k: v for k, v in cfg.items() if not k.startswith("_frenzy") and k not in ("quantization_config", "auto_map")}
    config = transformers.CONFIG_MAPPING[cfg["model_type"]](**{k: v for k, v in cfg.items() if k != "model_type"})
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    assert arch.num_params == sum(p.numel() for p in model.parameters())


def test_mla_is_planned_without_tensor_parallelism():
    from frenzy.core.job import JobSpec
    from frenzy.core.plan import ParallelPlan
    from frenzy.core.training import TrainingConfig
    from frenzy.memory.plans import check_plan, plan_notes

    job = JobSpec(model=_arch("deepseek-ai/DeepSeek-V2-Lite", {})[0], training=TrainingConfig(), seq_len=1024,
                  global_batch=8)
    with pytest.raises(ValueError, match="latent attention"):
        check_plan(job, ParallelPlan(dp=1, tp=2))
    assert any("without tensor parallelism" in note for note in plan_notes(job))

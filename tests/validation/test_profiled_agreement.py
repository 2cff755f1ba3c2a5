"""The profiled path (families without a formula) against the fake-tensor trace: each family's
profile is measured on a reduced-depth copy (every layer kind once) and must predict a four-layer model's
whole step. Families marked held back had no part in building the path. Target: allocated peak
within 3% (the issue allows 5% for the profiled path alone); every breakdown term within 5% or
0.5% of the peak. Full-depth rows: bench/profiled_validation.py."""

from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the trace needs the 'trace' extra (torch, transformers, peft)")
pytest.importorskip("transformers", reason="the trace needs the 'trace' extra (torch, transformers, peft)")

from dataclasses import replace  # noqa: E402

from frenzy.memory.validation import _case, compare  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "profiled"

CASES = [
    # no formula: MLA with a dense first layer, alternating sliding/full MoE, chunked attention with NoPE layers
    _case(str(CONFIGS / "deepseek-ai--DeepSeek-V2-Lite.json"), precision="bf16", mb=2, seq=1024, layers=4),
    _case(str(CONFIGS / "deepseek-ai--DeepSeek-V2-Lite.json"), method="lora", targets=("all-linear",), layers=4),
    _case(str(CONFIGS / "openai--gpt-oss-20b.json"), precision="bf16", mb=2, seq=1024, layers=4),
    _case(str(CONFIGS / "openai--gpt-oss-20b.json"), method="lora", recompute="full", mb=2, seq=1024, layers=4),
    _case(str(CONFIGS / "meta-llama--Llama-4-Scout-17B-16E.json"), precision="bf16", mb=1, seq=1024, layers=4),
    _case(str(CONFIGS / "meta-llama--Llama-4-Scout-17B-16E.json"), method="qlora", mb=1, seq=1024, layers=4),
    # held back
    _case(str(CONFIGS / "baidu--ERNIE-4.5-0.3B-PT.json"), precision="bf16", mb=4, seq=1024, layers=4),
    _case(str(CONFIGS / "LGAI-EXAONE--EXAONE-4.0-1.2B.json"), method="lora", attention="eager", mb=1, seq=512,
          layers=4),
    _case(str(CONFIGS / "allenai--Olmo-3-1025-7B.json"), precision="bf16", mb=2, seq=1024, layers=4),
    _case(str(CONFIGS / "swiss-ai--Apertus-8B-2509.json"), method="qlora", mb=1, seq=1024, layers=4),
    _case(str(CONFIGS / "zai-org--GLM-4.5-Air.json"), precision="bf16", mb=2, seq=1024, layers=3),
    _case(str(CONFIGS / "baidu--ERNIE-4.5-21B-A3B-PT.json"), method="lora", targets=("all-linear",), layers=3),
    # a formula family through the profiled path
    _case("Qwen/Qwen2.5-0.5B", precision="bf16", mb=4, seq=1024, layers=4),
]
CASES = [replace(case, profiled=True) for case in CASES]


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_the_profile_predicts_the_traced_step(case):
    result = compare(case)
    assert not result.misses(), "; ".join(result.misses())

"""The profiled path (families without a formula) against the fake-tensor trace, at full depth.

Each row predicts the allocated peak from a profile measured on a reduced-depth copy (every layer
kind once) and compares it with the trace of the whole model. Rows of families that have a
formula are run both ways, side by side. Families under "held back" had no part in building the
profiled path. Targets (issue): formula families median <= 0.5%, worst <= 3%; the profiled path
alone worst <= 5%. Writes docs/ACCURACY.md#profiled-validation.

    python bench/profiled_validation.py [--quick] [--only WORD,WORD]  (configs whose file name holds a word)
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import write_section  # noqa: E402

from frenzy.core.hf_config import PARSERS  # noqa: E402
from frenzy.memory.validation import Case, _case, compare  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[1] / "tests" / "data" / "profiled"
HELD_BACK = ("baidu--ERNIE-4.5-0.3B-PT", "LGAI-EXAONE--EXAONE-4.0-1.2B", "ByteDance-Seed--Seed-OSS-36B-Base",
             "swiss-ai--Apertus-8B-2509", "allenai--Olmo-3-1025-7B", "zai-org--GLM-4.5-Air",
             "baidu--ERNIE-4.5-21B-A3B-PT")
# Formula families, predicted both ways on the same rows.
FORMULA = ("meta-llama/Llama-3.2-1B", "Qwen/Qwen3-0.6B", "mistralai/Mistral-7B-v0.1", "google/gemma-2-2b")
SETTINGS = (dict(precision="bf16", mb=4, seq=2048),
            dict(precision="bf16-mixed", mb=1, seq=2048),
            dict(precision="bf16", method="lora", targets=("all-linear",), mb=2, seq=2048),
            dict(precision="bf16", method="qlora", mb=1, seq=4096),
            dict(precision="bf16", recompute="full", mb=8, seq=4096),
            dict(precision="bf16", method="lora", attention="eager", mb=1, seq=1024))


def cases(quick: bool, only: list[str]) -> list[tuple[str, Case]]:
    settings = SETTINGS[:2] if quick else SETTINGS
    rows = []
    for path in sorted(CONFIGS.glob("*.json")):
        if only and not any(word.lower() in path.stem.lower() for word in only):
            continue
        has_formula = json.loads(path.read_text())["model_type"] in PARSERS
        group = "held back" if path.stem in HELD_BACK else "formula family" if has_formula else "no formula"
        for s in settings:
            if has_formula:
                rows.append(("formula", _case(str(path), layers=None, **s)))
            rows.append((group + (", profiled" if has_formula else ""),
                         _with(_case(str(path), layers=None, **s), profiled=True)))
    for model in FORMULA if not only else ():
        for s in settings:
            rows.append(("formula", _case(model, layers=None, **s)))
            rows.append(("formula, profiled", _with(_case(model, layers=None, **s), profiled=True)))
    return rows


def _with(case: Case, **changes) -> Case:
    from dataclasses import replace

    return replace(case, **changes)


def main() -> None:
    quick = "--quick" in sys.argv
    only = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else []
    lines, errors = [], {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as cache:
        import os

        os.environ.setdefault("FRENZY_CACHE_DIR", cache)
        for group, case in cases(quick, only):
            t0 = time.perf_counter()
            try:
                c = compare(case)
            except Exception as exc:  # noqa: BLE001 - report the row, keep going
                lines.append(f"| {group} | {case.label} | failed: {type(exc).__name__}: {str(exc)[:100]} | | | |")
                print(lines[-1], flush=True)
                continue
            terms = c.term_errors()
            worst = max(terms, key=lambda t: abs(terms[t]))
            errors.setdefault(group, []).append(abs(c.peak_error))
            lines.append(f"| {group} | {case.label} | {c.traced.allocated_bytes / 2**30:.2f} | "
                         f"{c.formula.allocated_bytes / 2**30:.2f} | {c.peak_error:+.2%} | {worst} {terms[worst]:+.1%} | "
                         f"{time.perf_counter() - t0:.0f} |")
            print(lines[-1], flush=True)
    summary = "; ".join(f"{g}: {len(e)} rows, median {statistics.median(e):.2%}, worst {max(e):.2%}"
                        for g, e in errors.items())
    title = "Profiled path against the trace" + (f" ({', '.join(only)}, side by side)" if only else "")
    text = (f"## {title}\n\nFull-depth models; the profile is measured on a reduced-depth "
            f"copy (every layer kind once) and scaled. {summary}. {time.perf_counter() - started:.0f} s.\n\n"
            "| group | configuration | traced GiB | predicted GiB | peak error | worst term | s |\n"
            "|---|---|---:|---:|---:|---|---:|\n" + "\n".join(lines))
    suffix = ("-quick" if quick else "") + ("-" + "-".join(only).lower() if only else "")
    flags = (" --quick" if quick else "") + (f" --only {','.join(only)}" if only else "")
    write_section("profiled-validation" + suffix, text, doc="docs/ACCURACY.md",
                  command="python bench/profiled_validation.py" + flags)


if __name__ == "__main__":
    main()

"""How long planning a family without a formula takes: the first call (the model's structure built
on the meta device and its activation profile traced, in a fresh process with an empty cache;
target <= 10 s on a 2-core machine) and later calls (cached; in-process plan enumeration over every
catalog GPU type, target < 50 ms). Writes docs/BENCHMARKS.md#profiled-speed.

    python bench/profiled_speed.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import write_section  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[1] / "tests" / "data" / "profiled"
JOBS = [  # (model, global batch, seq, method): families without a formula
    (str(CONFIGS / "zai-org--GLM-4.5-Air.json"), 128, 4096, "lora"),  # 46 layers, 128 experts, dense first
    (str(CONFIGS / "baidu--ERNIE-4.5-21B-A3B-PT.json"), 64, 4096, "full"),
    (str(CONFIGS / "ByteDance-Seed--Seed-OSS-36B-Base.json"), 64, 4096, "lora"),  # 64 layers
    (str(CONFIGS / "swiss-ai--Apertus-8B-2509.json"), 64, 4096, "full"),
    (str(CONFIGS / "LGAI-EXAONE--EXAONE-4.0-1.2B.json"), 64, 4096, "full"),
]
REPEATS = 10


def _first_call(model: str, batch: int, seq: int, method: str, cache: str) -> float:
    argv = [sys.executable, "-m", "frenzy.cli.main", "plan", model, "--global-batch", str(batch), "--seq", str(seq),
            "--method", method, "--json"]
    start = time.perf_counter()
    subprocess.run(argv, env=dict(os.environ, FRENZY_CACHE_DIR=cache), check=True, capture_output=True)
    return time.perf_counter() - start


def _later_calls(model: str, batch: int, seq: int, method: str) -> tuple[list[float], list[float]]:
    """(load_model times, plan_job times), each over REPEATS calls in this process."""
    from frenzy.core import catalog
    from frenzy.core.hf_config import load_model
    from frenzy.core.job import JobSpec
    from frenzy.core.training import Method, TrainingConfig
    from frenzy.memory.plans import plan_job

    gpus = list(catalog.gpu_types().values())
    loads, plans = [], []
    for _ in range(REPEATS):
        start = time.perf_counter()
        arch = load_model(model)
        loads.append(time.perf_counter() - start)
        job = JobSpec(model=arch, training=TrainingConfig(method=Method(method)), seq_len=seq, global_batch=batch)
        start = time.perf_counter()
        plan_job(job, gpus)
        plans.append(time.perf_counter() - start)
    return loads, plans


def main() -> None:
    rows = ["| model | method | global batch x seq | first call, fresh process (s) | later load_model median (ms) | "
            "later plan_job median (ms) | max (ms) |", "|---|---|---|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as cache:
        os.environ["FRENZY_CACHE_DIR"] = cache
        for model, batch, seq, method in JOBS:
            first = _first_call(model, batch, seq, method, cache)
            loads, plans = _later_calls(model, batch, seq, method)
            rows.append(f"| {Path(model).stem} | {method} | {batch} x {seq} | {first:.1f} | "
                        f"{statistics.median(loads) * 1e3:.1f} | {statistics.median(plans) * 1e3:.1f} | "
                        f"{max(plans) * 1e3:.1f} |")
            print(rows[-1], flush=True)
    summary = ("## Profiled families: planning speed\n\nFirst call: `frenzy plan` in a fresh process with an empty "
               "profile cache (interpreter start, PyTorch and transformers import, the meta-device structure and "
               f"four traces of a reduced-depth copy). Later calls, in one process ({REPEATS} runs each): `load_model` "
               "(the cached structure) and `plan_job` over every catalog GPU type, timed as bench/plan_speed.py times "
               "formula families. Targets: first call <= 10 s, later calls < 50 ms.\n\n"
               + "\n".join(rows))
    print(summary)
    write_section("profiled-speed", summary, command="python bench/profiled_speed.py")


if __name__ == "__main__":
    main()

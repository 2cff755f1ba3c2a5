"""Sanity-check frenzy.perf against published training throughputs; writes docs/BENCHMARKS.md#perf-sanity.

Sources (bf16, no FP8):
  llm-foundry  mosaicml/llm-foundry scripts/train/benchmarking/README.md, MPT models, FSDP full shard, 8 GPUs
               (MPT-125M/1B/3B/7B/13B compared with the catalog model of the same width and depth:
               pythia-160m, pythia-1.4b, pythia-2.8b, Llama-2-7b, Llama-2-13b)
  torchtitan   pytorch/torchtitan docs/performance.md, Llama 3 8B FSDP2 on 64 A100-80GB (seq 8192, local
               batch 1, selective AC) and Llama 3.1 8B on 8 H100 (local batch 2, selective AC; those H100s
               have 96 GB HBM2e at 2.4 TB/s and a 500 W limit, slower than the catalog's H100 SXM)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import write_section  # noqa: E402

from frenzy.core import catalog  # noqa: E402
from frenzy.core.hf_config import load_model  # noqa: E402
from frenzy.core.job import JobSpec  # noqa: E402
from frenzy.core.plan import ParallelPlan  # noqa: E402
from frenzy.core.training import Precision, Recompute, TrainingConfig, ZeroStage  # noqa: E402
from frenzy.perf import flops  # noqa: E402
from frenzy.perf.step import step_time  # noqa: E402

NONE, SEL, FULL = Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL
# (source, published model, catalog stand-in, GPU, seq, micro, accum, dp, recompute, published tokens/s/GPU)
CASES = [
    ("llm-foundry", "MPT-125M", "EleutherAI/pythia-160m", "A100-SXM-80G", 2048, 40, 2, 8, NONE, 142830),
    ("llm-foundry", "MPT-1B", "EleutherAI/pythia-1.4b", "A100-SXM-80G", 2048, 14, 4, 8, NONE, 20513),
    ("llm-foundry", "MPT-3B", "EleutherAI/pythia-2.8b", "A100-SXM-80G", 2048, 10, 2, 8, NONE, 10811),
    ("llm-foundry", "MPT-7B", "meta-llama/Llama-2-7b-hf", "A100-SXM-80G", 2048, 6, 2, 8, NONE, 4641),
    ("llm-foundry", "MPT-13B", "meta-llama/Llama-2-13b-hf", "A100-SXM-80G", 2048, 2, 3, 8, NONE, 2262),
    ("llm-foundry", "MPT-7B", "meta-llama/Llama-2-7b-hf", "A100-SXM-40G", 2048, 12, 4, 8, FULL, 3679),
    ("llm-foundry", "MPT-13B", "meta-llama/Llama-2-13b-hf", "A100-SXM-40G", 2048, 4, 16, 8, FULL, 1668),
    ("llm-foundry", "MPT-1B", "EleutherAI/pythia-1.4b", "H100-SXM-80G", 2048, 14, 1, 8, NONE, 45455),
    ("llm-foundry", "MPT-3B", "EleutherAI/pythia-2.8b", "H100-SXM-80G", 2048, 10, 3, 16, NONE, 24142),
    ("llm-foundry", "MPT-7B", "meta-llama/Llama-2-7b-hf", "H100-SXM-80G", 2048, 6, 1, 8, NONE, 10643),
    ("llm-foundry", "MPT-13B", "meta-llama/Llama-2-13b-hf", "H100-SXM-80G", 2048, 2, 1, 8, NONE, 4792),
    ("torchtitan", "Llama 3 8B", "meta-llama/Llama-3.1-8B", "A100-SXM-80G", 8192, 1, 1, 64, SEL, 2904),
    ("torchtitan", "Llama 3.1 8B", "meta-llama/Llama-3.1-8B", "H100-SXM-80G", 8192, 2, 1, 8, SEL, 5762),
]


def predict(model, gpu, seq, micro, accum, dp, recompute) -> tuple[float, float]:
    arch = load_model(model)
    job = JobSpec(model=arch, training=TrainingConfig(precision=Precision.BF16_MIXED), seq_len=seq,
                  global_batch=micro * accum * dp)
    plan = ParallelPlan(dp=dp, zero=ZeroStage.PARAMETERS, micro_batch=micro, grad_accum=accum, recompute=recompute)
    g = catalog.gpu_type(gpu)
    tps = step_time(job, plan, g).tokens_per_s_per_gpu
    mfu = tps * flops.model_flops_per_token(arch, seq) / g.peak_flops_for("bf16")
    return tps, mfu


def main() -> None:
    rows, errors = [], []
    for source, name, model, gpu, seq, micro, accum, dp, rc, published in CASES:
        tps, mfu = predict(model, gpu, seq, micro, accum, dp, rc)
        err = tps / published - 1
        errors.append(abs(err))
        rows.append(f"| {source} | {name} ({model.split('/')[1]}) | {dp}x {gpu} | {seq} | mb {micro} x {accum}, "
                    f"AC {rc.name.lower()} | {published:,} | {tps:,.0f} | {err:+.1%} | {mfu:.1%} |")
    errors.sort()
    md = ("## Perf model sanity check (`frenzy.perf`)\n\n"
          "Predicted training throughput against published bf16 numbers (FSDP / ZeRO-3 data parallel). "
          "Sources: llm-foundry `scripts/train/benchmarking/README.md` (MPT models; the catalog model of "
          "the same width and depth stands in) and torchtitan `docs/performance.md` (its H100s run at 500 W "
          "with 2.4 TB/s HBM2e, below the catalog H100 SXM, so we over-predict there). `frenzy.perf.efficiency` was calibrated on three rows (MPT-125M and "
          "MPT-7B on A100-80GB, MPT-7B on H100); the other rows are out of sample.\n\n"
          "| source | model (catalog stand-in) | GPUs | seq | batch | published tok/s/GPU | predicted | error | "
          "predicted MFU |\n|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) +
          f"\n\nMedian absolute error {errors[len(errors) // 2]:.1%}, worst {errors[-1]:.1%} over {len(errors)} "
          "published configurations.")
    print(md)
    write_section("perf-sanity", md)


if __name__ == "__main__":
    main()

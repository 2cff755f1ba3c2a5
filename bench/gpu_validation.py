"""MARP and the perf model against Frenzy's own H100 measurements (tests/data/gpu_memory_h100.csv,
made by bench/gpu_memory.py); writes docs/ACCURACY.md#measured-h100 and docs/BENCHMARKS.md#perf-h100.

Memory: per configuration, MARP's allocated, reserved and device bytes against
max_memory_allocated, max_memory_reserved and NVML's process memory; the configurations that ran
out of memory on the 80 GB card against MARP's verdict; and, on the same rows, the other
estimators bench/accuracy.py runs. Step time: the perf model's tokens/s on one H100 against the
measured median step (`--timed-steps`), with the MFU the measurement implies.

    python bench/gpu_validation.py
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from accuracy import estimator_row  # noqa: E402
from estimators import ESTIMATORS  # noqa: E402
from report import write_section  # noqa: E402

from frenzy.core import catalog  # noqa: E402
from frenzy.memory.estimate import estimate  # noqa: E402
from frenzy.memory.measurements import GpuRun, load_gpu_runs  # noqa: E402
from frenzy.memory.plans import DEFAULT_SAFETY_MARGIN, usable_bytes  # noqa: E402
from frenzy.perf import flops  # noqa: E402
from frenzy.perf.step import step_time  # noqa: E402

CSV = HERE.parent / "tests" / "data" / "gpu_memory_h100.csv"
# The same configurations (15 of them) under PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,
# which Frenzy's workers run with (frenzy.train.config.CUDA_ALLOCATOR_CONF).
EXPANDABLE_CSV = CSV.with_name("gpu_memory_h100_expandable.csv")
H100 = catalog.gpu_type("H100-SXM-80G")
GiB = 2**30


def median_and_worst(errors: list[float]) -> tuple[float, float] | None:
    """Median and largest absolute relative error, or None when there are none."""
    absolute = sorted(abs(e) for e in errors)
    return (statistics.median(absolute), absolute[-1]) if absolute else None


def spread(errors: list[float]) -> str:
    found = median_and_worst(errors)
    return f"median {found[0]:.1%}, worst {found[1]:.1%}" if found else "n/a"


def memory_section(runs: list[GpuRun]) -> str:
    names = ["MARP"] + [e.NAME for e in ESTIMATORS]
    errors: dict[str, list[float]] = {n: [] for n in names}
    reserved_err, device_err, lines, oom_lines = [], [], [], []
    for run in runs:
        marp = estimate(run.job, run.plan, H100)
        if not run.ran:
            fits = marp.required_bytes <= usable_bytes(H100, DEFAULT_SAFETY_MARGIN)
            oom_lines.append(f"| {run.label} | {run.allocated / GiB:.2f} (at the failure) | "
                             f"{marp.required_bytes / GiB:.2f} | {'fits: wrong' if fits else 'does not fit: right'} |")
            continue
        others = [e.predict(estimator_row(run.row["model"], run.job, run.plan)) for e in ESTIMATORS]
        cells = []
        for name, predicted in zip(names, [marp.allocated_bytes, *others]):
            if predicted is None:
                cells.append("n/a")
                continue
            err = predicted / run.allocated - 1
            errors[name].append(err)
            cells.append(f"{predicted / GiB:.2f} ({err:+.1%})")
        reserved_err.append(marp.reserved_bytes / run.reserved - 1)
        device_err.append(marp.device_bytes / run.device - 1)
        lines.append(f"| {run.label} | {run.allocated / GiB:.2f} | " + " | ".join(cells)
                     + f" | {run.device / GiB:.2f} | {marp.device_bytes / GiB:.2f} ({device_err[-1]:+.1%}) |")
    first = runs[0].row
    under = [e for e in device_err if e < -0.02]
    summary = ["| estimator | rows | allocated: median abs error | worst |", "|---|---:|---:|---:|"]
    for name in names:
        found = median_and_worst(errors[name])
        summary.append(f"| {name} | {len(errors[name])} | "
                       + (f"{found[0]:.1%} | {found[1]:.1%} |" if found else "n/a | n/a |"))
    return (
        "## Measured on H100\n\n"
        f"{len(runs)} configurations over {len({r.row['model'] for r in runs})} catalog models, each in a fresh "
        f"process on one {first['gpu_name']} (torch {first['torch_version']}, CUDA {first['cuda_version']}, "
        f"transformers {first['transformers_version']}, peft {first['peft_version']}, bitsandbytes "
        f"{first['bitsandbytes_version']}), random weights from the catalog config, synthetic tokens, the loop "
        "of `bench/gpu_memory.py` (the fake-tensor trace's loop). Measured: the second step's "
        "`max_memory_allocated`, `max_memory_reserved` and NVML's memory of the process. MARP predicts from "
        "the architecture alone, with no GPU.\n\n"
        f"- **Allocated peak** (what decides a fit, with the runtime overhead): MARP {spread(errors['MARP'])} "
        f"over {len(errors['MARP'])} rows that ran.\n"
        f"- **Reserved** (allocator cache): {spread(reserved_err)}. **Device** (NVML): {spread(device_err)}; "
        f"{len(under)} of {len(device_err)} rows under NVML by more than 2%.\n"
        f"- **Did not fit**: {len(oom_lines)} configurations ran out of memory on the 80 GB card; the table "
        "below gives MARP's verdict for each.\n\n" + "\n".join(summary) + "\n\n"
        "| configuration | measured allocated GiB | " + " | ".join(f"{n} GiB (err)" for n in names)
        + " | NVML GiB | MARP device GiB (err) |\n|---|---:|" + "---:|" * len(names) + "---:|---:|\n"
        + "\n".join(lines)
        + "\n\nConfigurations that ran out of memory (80 GB card, `required_bytes` = allocated + runtime "
        "overhead):\n\n| configuration | allocated when it failed, GiB | MARP required GiB | MARP's verdict |\n"
        "|---|---:|---:|---|\n" + "\n".join(oom_lines)
    )


def expandable_section(runs: list[GpuRun], expandable: list[GpuRun]) -> str:
    default = {r.label: r for r in runs}
    lines, device_err = [], []
    for run in expandable:
        before = default[run.label]
        marp = estimate(run.job, run.plan, H100)
        fits = marp.required_bytes <= usable_bytes(H100, DEFAULT_SAFETY_MARGIN)
        err = marp.device_bytes / run.device - 1 if run.ran else None
        if err is not None:
            device_err.append(err)
        lines.append(f"| {run.label} | {'ran' if before.ran else 'out of memory'} / {'ran' if run.ran else 'out of memory'} "
                     f"| {run.allocated / GiB:.2f} | {(before.reserved - before.allocated) / GiB:.2f} / "
                     f"{(run.reserved - run.allocated) / GiB:.2f} | {before.device / GiB:.2f} / {run.device / GiB:.2f} | "
                     f"{'fits' if fits else 'does not fit'} | " + (f"{err:+.1%} |" if err is not None else "n/a |"))
    under = sum(e < -0.02 for e in device_err)
    return (
        "### With expandable segments\n\n"
        f"{len(expandable)} of the configurations again with `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`, "
        "which Frenzy's workers now run with. BLOOM-560m, which ran out of memory with the default "
        "allocator although its allocated peak fits (the 7.7 GiB fp32 logits met 8.5 GiB of fragmented cache), "
        "runs; the allocated peaks do not change. Device memory (NVML): MARP "
        f"{spread(device_err)}, {under} of {len(device_err)} rows under by more than 2%.\n\n"
        "| configuration | default / expandable | allocated GiB | cache slack GiB (reserved - allocated), "
        "default / expandable | NVML GiB, default / expandable | MARP's verdict on 80 GB (+5% margin) | "
        "MARP device vs NVML (expandable) |\n|---|---|---:|---:|---:|---|---:|\n" + "\n".join(lines)
    )


def perf_section(runs: list[GpuRun]) -> str:
    lines, errors, big = [], [], []
    for run in runs:
        if not run.ran or not run.tokens_per_s:
            continue
        predicted = step_time(run.job, run.plan, H100).tokens_per_s_per_gpu
        err = predicted / run.tokens_per_s - 1
        errors.append(err)
        if run.job.model.num_params >= 3e9:
            big.append(err)
        key = run.job.training.precision.flops_key
        mfu = run.tokens_per_s * flops.model_flops_per_token(run.job.model, run.job.seq_len) / H100.peak_flops_for(key)
        lines.append(f"| {run.label} | {run.tokens_per_s:,.0f} | {predicted:,.0f} | {err:+.1%} | {mfu:.1%} |")
    return (
        "## Step time on one H100 (`frenzy.perf`)\n\n"
        "Predicted tokens/s on one H100 against the median of the timed steps of "
        "`bench/gpu_memory.py` (one process per configuration, Hugging Face eager code, no torch.compile). "
        "MFU is measured tokens/s x 6N-style model FLOPs per token over the GPU's peak for the precision.\n\n"
        f"Error over {len(errors)} configurations: {spread(errors)} (signed median "
        f"{statistics.median(errors):+.1%}); on the {len(big)} rows of models with 3B parameters or more: "
        f"{spread(big)}.\n\n"
        "| configuration | measured tok/s | predicted tok/s | error | measured MFU |\n|---|---:|---:|---:|---:|\n"
        + "\n".join(lines)
    )


def main() -> None:
    runs = load_gpu_runs(CSV)
    memory = memory_section(runs) + "\n\n" + expandable_section(runs, load_gpu_runs(EXPANDABLE_CSV))
    perf = perf_section(runs)
    print(memory + "\n\n" + perf)
    write_section("measured-h100", memory, doc="docs/ACCURACY.md", command="python bench/gpu_validation.py")
    write_section("perf-h100", perf, command="python bench/gpu_validation.py")


if __name__ == "__main__":
    main()

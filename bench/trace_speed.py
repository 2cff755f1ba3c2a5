"""How long `frenzy.memory.trace.trace_step` takes, and how much host memory it needs, for 7B-class
models (the tracer must stay under 30 s and well under 2 GiB RSS on a 2-core machine).

Each configuration runs in a fresh subprocess so that its max RSS (resource.getrusage) is its own.
The table goes to docs/BENCHMARKS.md (section trace-speed) unless --no-write is given.

    .venv/bin/python bench/trace_speed.py [--model meta-llama/Llama-2-7b-hf] [--seq 2048] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import write_section  # noqa: E402

CONFIGS = [  # (precision, method, optimizer, recompute, attention)
    ("bf16", "lora", "adamw", "none", "flash"),
    ("bf16", "full", "adamw", "none", "flash"),
    ("bf16-mixed", "full", "adamw", "full", "flash"),
    ("bf16-mixed", "qlora", "adamw", "none", "flash"),
]

_CHILD = r"""
import json, resource, sys, time
started = time.perf_counter()
from frenzy.core.plan import ParallelPlan
from frenzy.core.training import Attention, Method, Optimizer, Precision, Recompute, TrainingConfig
from frenzy.memory.trace import trace_step
imported = time.perf_counter() - started
model, seq, precision, method, optimizer, recompute, attention = sys.argv[1:8]
training = TrainingConfig(precision=Precision(precision), method=Method(method), optimizer=Optimizer(optimizer),
                          attention=Attention(attention))
result = trace_step(model, training, ParallelPlan(micro_batch=1, recompute=Recompute.parse(recompute)), int(seq))
print(json.dumps({"import_s": imported, "trace_s": result.trace_seconds,
                  "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "allocated_bytes": result.estimate.allocated_bytes, "reserved_bytes": result.estimate.reserved_bytes,
                  "activation_bytes_per_layer": result.activation_bytes_per_layer}))
"""


def run_one(model: str, seq: int, config: tuple[str, ...]) -> dict:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _CHILD, model, str(seq), *config],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"trace failed for {config}:\n{done.stderr[-3000:]}")
    row = json.loads(done.stdout.strip().splitlines()[-1])
    row["wall_s"] = time.perf_counter() - started
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="meta-llama/Llama-2-7b-hf")
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/BENCHMARKS.md alone")
    args = parser.parse_args()
    gib = 1024 ** 3
    lines = [f"Fake-tensor trace of `{args.model}`, micro-batch 1, sequence {args.seq} (load average "
             f"{os.getloadavg()[0]:.1f} at start; timings stretch on a shared machine).", "",
             "| precision | method | optimizer | recompute | attention | trace s | process wall s | max RSS GiB "
             "| traced allocated GiB | traced reserved GiB |", "|---|---|---|---|---|---:|---:|---:|---:|---:|"]
    print(lines[0])
    for config in CONFIGS:
        row = run_one(args.model, args.seq, config)
        lines.append(f"| {' | '.join(config)} | {row['trace_s']:.1f} | {row['wall_s']:.1f} | "
                     f"{row['max_rss_bytes'] / gib:.2f} | {row['allocated_bytes'] / gib:.2f} | "
                     f"{row['reserved_bytes'] / gib:.2f} |")
        print(lines[-1], flush=True)
    if not args.no_write:
        write_section("trace-speed", "## Fake-tensor trace speed\n\n" + "\n".join(lines))


if __name__ == "__main__":
    main()

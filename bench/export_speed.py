"""How long `frenzy.train.export.write_artifacts` takes on one rank for Qwen2.5-0.5B (built from its
catalog config with random weights, nothing downloaded): full fine-tuning with fp32 master weights
(one file, and 512 MiB shards), and a rank-16 LoRA adapter on q, k, v, o; transformers'
`save_pretrained` of the same model is the reference for the full export.

Each case runs in a fresh subprocess; a sampling thread records the process's resident memory
during the export, so "extra RSS" is what the export added on top of the trained model.
Prints a Markdown table (docs/BENCHMARKS.md is assembled from it by hand).

    .venv/bin/python bench/export_speed.py [--model Qwen/Qwen2.5-0.5B]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

CASES = [  # (label, method, max_shard_bytes or 0 for the default 5 GiB, writer)
    ("full fp32, 5 GiB shards", "full", 0, "frenzy"),
    ("full fp32, 512 MiB shards", "full", 512 * 2**20, "frenzy"),
    ("full fp32, transformers save_pretrained", "full", 0, "transformers"),
    ("LoRA r16 q,k,v,o", "lora", 0, "frenzy"),
]

_CHILD = r"""
import json, os, sys, tempfile, threading, time
from pathlib import Path
import torch
from frenzy.core.hf_config import load_config
from frenzy.train.config import WorkerConfig
from frenzy.train.export import write_artifacts
from frenzy.train.model import build_model

model_name, method, shard, writer = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
torch.set_num_threads(2)
hf_config, name = load_config(model_name)
cfg = WorkerConfig(job_id="bench", attempt=1, model_name=model_name, family=hf_config["model_type"],
                   hf_config=hf_config, method=method, precision="bf16-mixed", lora_rank=16,
                   lora_targets=("q", "k", "v", "o"), global_batch=1)
started = time.perf_counter()
model = build_model(cfg)
build_s = time.perf_counter() - started
page = os.sysconf("SC_PAGE_SIZE")

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * page

before, peak, done = rss(), [0], threading.Event()

def sample():
    while not done.is_set():
        peak[0] = max(peak[0], rss())
        time.sleep(0.005)

out = Path(tempfile.mkdtemp(prefix="frenzy-export-bench-")) / "out"
thread = threading.Thread(target=sample, daemon=True)
thread.start()
started = time.perf_counter()
if writer == "transformers":
    model.save_pretrained(out)
    files = sorted(p.name for p in out.iterdir())
else:
    files = write_artifacts(model, cfg, out, **({"max_shard_bytes": shard} if shard else {}))
export_s = time.perf_counter() - started
done.set()
thread.join()
written = sum((out / f).stat().st_size for f in files)
params = sum(p.numel() for p in model.parameters())
print(json.dumps({"build_s": build_s, "export_s": export_s, "bytes": written, "files": len(files),
                  "extra_rss_bytes": max(0, peak[0] - before), "params": params}))
import shutil; shutil.rmtree(out.parent)
"""


def run_one(model: str, method: str, shard: int, writer: str) -> dict:
    done = subprocess.run([sys.executable, "-c", _CHILD, model, method, str(shard), writer],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"export failed for {method}/{writer}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="Qwen/Qwen2.5-0.5B")
    args = parser.parse_args()
    mib = 2**20
    print(f"Export of `{args.model}` (random weights) on one rank, CPU, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f} at start; {time.strftime('%Y-%m-%d')}.\n")
    print("| case | files | MiB written | export s | MiB/s | extra RSS MiB | build s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, method, shard, writer in CASES:
        row = run_one(args.model, method, shard, writer)
        print(f"| {label} | {row['files']} | {row['bytes'] / mib:.1f} | {row['export_s']:.2f} | "
              f"{row['bytes'] / mib / max(row['export_s'], 1e-9):.0f} | {row['extra_rss_bytes'] / mib:.0f} | "
              f"{row['build_s']:.1f} |", flush=True)


if __name__ == "__main__":
    main()

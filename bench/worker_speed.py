"""Training-worker throughput on this machine's CPU: one rank (gloo), the real training loop.

    python bench/worker_speed.py [--steps 20] [--model examples/tiny-llama/config.json]

Prints the job's tokens/s: all tokens over the wall time of every step (the first two steps of an
attempt carry the fake GPU's memory measurement, so they are in), and the median step's.
Only fields every worker version knows are passed, so the same script times older commits too
(`git worktree add /tmp/old REV && PYTHONPATH=/tmp/old/src python bench/worker_speed.py`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--model", default=str(ROOT / "examples" / "tiny-llama" / "config.json"))
    parser.add_argument("--method", default="full")
    parser.add_argument("--precision", default="bf16-mixed")
    parser.add_argument("--global-batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    args = parser.parse_args()

    import torch.distributed as dist

    from frenzy.train.worker import train_loop

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29517", RANK="0", WORLD_SIZE="1")
    dist.init_process_group("gloo", rank=0, world_size=1)
    storage = tempfile.mkdtemp(prefix="frenzy-worker-speed-")
    config = dict(job_id="bench", attempt=1, model_name="bench", family="llama",
                  hf_config=json.loads(Path(args.model).read_text()), seq_len=args.seq,
                  global_batch=args.global_batch, micro_batch=args.global_batch, grad_accum=1, dp=1, tp=1,
                  steps=args.steps, storage_path=storage, precision=args.precision, method=args.method,
                  checkpoint_every=10**6, gpu_type="A100-SXM-80G", gpu_memory_bytes=80 * 2**30,
                  predicted_peak_bytes=2**30)
    reports = []
    began = time.perf_counter()
    train_loop(config, report=reports.append)
    wall = time.perf_counter() - began
    dist.destroy_process_group()
    step_times = [r["step_time_s"] for r in reports]
    tokens = args.global_batch * args.seq * args.steps
    print(json.dumps({"steps": args.steps, "tokens_per_s_all_steps": round(tokens / sum(step_times), 1),
                      "tokens_per_s_median_step": round(args.global_batch * args.seq / statistics.median(step_times), 1),
                      "wall_s_with_build_and_export": round(wall, 2)}))


if __name__ == "__main__":
    main()

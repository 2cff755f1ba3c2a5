"""Fine-tuning on an NVIDIA GPU with Frenzy's own training worker: tokens/s, MFU, and MARP's memory
prediction against what the CUDA caching allocator held.

Two kinds of run, each configuration in a fresh process (clean allocator statistics):

* `job`: a whole job through `frenzy.train.worker.train_loop` on one GPU (NCCL, world size 1) —
  data preparation, the steps, validation, the checkpoint and the exported model. Tokens/s is the
  median step without a checkpoint; MFU is that times the model FLOPs per token
  (`frenzy.perf.flops.model_flops_per_token`) over the card's dense bf16 peak (the catalog's).
* `rank0`: the FSDP2 mixed-precision mode (`fsdp2-param`) needs dp > 1, which one GPU cannot give
  with NCCL. The worker's own build, `wrap_data_parallel` (the real `fully_shard` with
  MixedPrecisionPolicy) and step run as rank 0 of a dp-wide fake process group (torch.testing's,
  as the tracer uses): its collectives return at once, so the numbers are garbage but every buffer
  rank 0 of a dp-wide run holds (shards, bf16 all-gather buffers, fp32 reduce-scatter input) is a
  real CUDA allocation. Memory only; no tokens/s.

Memory: the peak of step 2 (statistics reset after step 1), `max_memory_allocated` against MARP's
allocated bytes and `max_memory_reserved` against MARP's reserved bytes, for the plan that ran.

    python bench/gpu_finetune.py --out DIR            # every configuration -> DIR/gpu_finetune.jsonl
    python bench/gpu_finetune.py --out DIR --only NAME,NAME
    python bench/gpu_finetune.py --report FILE.jsonl  # the markdown table (no GPU needed)
    python bench/gpu_finetune.py --out DIR --cpu --tiny   # a CPU smoke test of this script
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHAT = str(ROOT / "examples" / "data" / "instructions.jsonl")
TINY = "examples/tiny-llama/config.json"  # --tiny: every configuration on this small model (CPU smoke test)

# name -> (kind, request fields, plan fields)
CONFIGS: dict[str, tuple[str, dict, dict]] = {
    "fsdp2-param-1b-dp8": ("rank0", dict(model="meta-llama/Llama-3.2-1B", seq_len=2048, global_batch=32),
                           dict(dp=8, zero=3, micro_batch=4, mixed_precision="fsdp2-param")),
    "chat-sft-1b": ("job", dict(model="meta-llama/Llama-3.2-1B", dataset=CHAT, seq_len=256, global_batch=64,
                                steps=10, learning_rate=2e-5, lr_schedule="cosine", warmup_steps=2, validation=0.1),
                    dict(micro_batch=32, grad_accum=2)),
    "text-1b": ("job", dict(model="meta-llama/Llama-3.2-1B", dataset="TEXT", seq_len=2048, global_batch=16, steps=8,
                            learning_rate=2e-5, validation=0.05),
                dict(micro_batch=4, grad_accum=4)),
    "autocast-zero3-1b-dp8": ("rank0", dict(model="meta-llama/Llama-3.2-1B", seq_len=2048, global_batch=32),
                              dict(dp=8, zero=3, micro_batch=4)),
    "fsdp2-param-3b-dp8": ("rank0", dict(model="meta-llama/Llama-3.2-3B", seq_len=4096, global_batch=16),
                           dict(dp=8, zero=3, micro_batch=2, mixed_precision="fsdp2-param")),
    "text-lora-1.5b": ("job", dict(model="Qwen/Qwen2.5-1.5B", dataset="TEXT", seq_len=2048, global_batch=16,
                                   steps=8, method="lora", lora_rank=16, lora_targets=["all-linear"],
                                   learning_rate=2e-4, validation=0.05),
                       dict(micro_batch=4, grad_accum=4)),
}


def text_corpus(folder: Path) -> str:
    """A local plain-text data set: the project's own documentation, one row per section (packed into
    seq_len windows by the text format, so every position carries loss)."""
    path = folder / "docs_corpus.jsonl"
    files = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
    sections = [part for f in files for part in f.read_text().split("\n## ") if part.strip()]
    path.write_text("".join(json.dumps({"text": text}) + "\n" for text in sections))
    return str(path)


def build(name: str, tiny: bool, scratch: Path):
    """(kind, JobRequest, ParallelPlan, JobSpec) of a configuration."""
    from frenzy.control.request import JobRequest
    from frenzy.core.plan import MixedPrecisionMode, ParallelPlan
    from frenzy.core.training import ZeroStage

    kind, fields, plan_fields = CONFIGS[name]
    fields = dict(fields, name=name)
    if fields.get("dataset") == "TEXT":
        fields["dataset"] = text_corpus(scratch)
    if tiny:
        fields.update(model=str(ROOT / TINY), seq_len=min(fields["seq_len"], 128), steps=3)
    request = JobRequest.from_json(fields)
    plan = ParallelPlan(dp=plan_fields.get("dp", 1), zero=ZeroStage(plan_fields.get("zero", 0)),
                        micro_batch=plan_fields["micro_batch"], grad_accum=plan_fields.get("grad_accum", 1),
                        mixed_precision=MixedPrecisionMode.parse(plan_fields.get("mixed_precision", "autocast")))
    return kind, request, plan, request.job_spec()


def worker_config(request, plan, spec, storage: Path, gpu, predicted):
    """What the control loop hands a worker for this plan (frenzy.control.loop's _worker_config)."""
    from frenzy.control.data_check import data_spec
    from frenzy.train.config import WorkerConfig

    config, name = request.config_and_name()
    data = data_spec(request)
    return WorkerConfig(
        job_id=request.name, attempt=1, model_name=name, family=spec.model.family, hf_config=config,
        method=request.method, precision=request.precision, optimizer=request.optimizer,
        learning_rate=request.learning_rate, lora_rank=request.lora_rank, lora_targets=tuple(request.lora_targets),
        seq_len=request.seq_len, global_batch=request.global_batch, steps=spec.steps, dataset=request.dataset,
        data=data.to_json() if data else None, seed=request.seed, lr_schedule=request.lr_schedule,
        warmup_steps=request.warmup_steps, eval_every=None, request=request.to_json(),
        plan={"describe": plan.describe()}, dp=plan.dp, tp=plan.tp, zero=int(plan.zero),
        micro_batch=plan.micro_batch, grad_accum=plan.grad_accum, recompute=plan.recompute.name.lower(),
        mixed_precision=plan.mixed_precision.value, storage_path=str(storage), checkpoint_every=10**6,
        gpu_type=gpu.name if gpu else "", gpu_memory_bytes=gpu.memory_bytes if gpu else 0,
        predicted_peak_bytes=predicted.device_bytes, fake_gpu=False)


class Peaks:
    """The report callback: per-step metrics, and allocator peaks of step 2 on (reset after step 1)."""

    def __init__(self, torch):
        self.torch, self.steps, self.began = torch, [], time.perf_counter()

    def __call__(self, metrics: dict) -> None:
        cuda = self.torch.cuda
        if cuda.is_available():
            metrics["max_allocated"] = cuda.max_memory_allocated()
            metrics["max_reserved"] = cuda.max_memory_reserved()
            cuda.reset_peak_memory_stats()  # the next step's peak alone
        metrics["wall_s"] = round(time.perf_counter() - self.began, 2)
        self.steps.append(metrics)


def run_job(cfg, torch) -> dict:
    import torch.distributed as dist

    from frenzy.train.worker import train_loop

    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo", rank=0, world_size=1)
    peaks = Peaks(torch)
    try:
        train_loop(cfg.to_json(), report=peaks)
    finally:
        dist.destroy_process_group()
    steps = peaks.steps
    timed = [s["step_time_s"] for s in steps[1:-1]]  # step 1 and the last save a checkpoint
    artifacts = sorted(p.name for p in cfg.artifacts_dir.iterdir())
    return {"steps": steps, "median_step_s": statistics.median(timed),
            "tokens_per_s": cfg.global_batch * cfg.seq_len / statistics.median(timed),
            "loss_first": steps[0]["loss"], "loss_last": steps[-1]["loss"], "eval_loss": steps[-1].get("eval_loss"),
            "allocated": max(s.get("max_allocated", 0) for s in steps[1:]),
            "reserved": max(s.get("max_reserved", 0) for s in steps[1:]), "artifacts": artifacts}


def run_rank0(cfg, torch) -> dict:
    """Rank 0 of a dp-wide FSDP2 run whose peers are a fake process group (see the module doc)."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from frenzy.train import worker
    from frenzy.train.batches import Batches
    from frenzy.train.model import build_model, device_mesh, wrap_data_parallel
    from frenzy.train.optimization import make_optimizer

    device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=cfg.world_size)
    try:
        mesh = device_mesh(cfg, device.type)
        model = wrap_data_parallel(build_model(cfg).to(device), cfg, mesh, device)
        optimizer = make_optimizer(model, cfg)
        batches = Batches(cfg, cfg.hf_config["vocab_size"], 0, None)
        loop = worker._Loop(cfg, model, optimizer, batches, device, None, None)
        peaks = Peaks(torch)
        for step in (1, 2):
            began = time.perf_counter()
            loop._step(step)
            peaks({"step": step, "step_time_s": round(time.perf_counter() - began, 3)})
    finally:
        dist.destroy_process_group()
    return {"steps": peaks.steps, "allocated": peaks.steps[-1].get("max_allocated", 0),
            "reserved": peaks.steps[-1].get("max_reserved", 0)}


def run_one(name: str, tiny: bool) -> dict:
    """One configuration in this process: MARP's prediction, then the run."""
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29531")
    os.environ.setdefault("FRENZY_WORKER_THREADS", str(min(8, os.cpu_count() or 1)))  # model init on the CPU
    from frenzy.train.config import CUDA_ALLOCATOR_CONF

    os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", CUDA_ALLOCATOR_CONF)
    import torch

    from frenzy.core import catalog
    from frenzy.memory.estimate import estimate
    from frenzy.perf.flops import model_flops_per_token

    memory_disk = "/dev/shm" if Path("/dev/shm").is_dir() else None  # checkpoints of GiBs, written fast
    scratch = Path(tempfile.mkdtemp(prefix=f"frenzy-gpu-{name}-", dir=memory_disk))
    kind, request, plan, spec = build(name, tiny, scratch)
    gpu = catalog.gpu_type(torch.cuda.get_device_name()) if torch.cuda.is_available() else None
    predicted = estimate(spec, plan, gpu)
    cfg = worker_config(request, plan, spec, scratch / "job", gpu, predicted)
    row = {"config": name, "kind": kind, "model": spec.model.name, "method": request.method,
           "precision": request.precision, "seq_len": request.seq_len, "plan": plan.describe(),
           "dp": plan.dp, "zero": int(plan.zero), "mixed_precision": plan.mixed_precision.value,
           "micro_batch": plan.micro_batch, "grad_accum": plan.grad_accum,
           "gpu": torch.cuda.get_device_name() if gpu else "cpu", "gpu_type": gpu.name if gpu else "",
           "torch": torch.__version__, "predicted_allocated": predicted.allocated_bytes,
           "predicted_reserved": predicted.reserved_bytes, "predicted_required": predicted.required_bytes}
    began = time.perf_counter()
    row.update(run_job(cfg, torch) if kind == "job" else run_rank0(cfg, torch))
    row["wall_s"] = round(time.perf_counter() - began, 1)
    if kind == "job" and gpu:
        flops = model_flops_per_token(spec.model, request.seq_len)
        row["mfu"] = row["tokens_per_s"] * flops / gpu.peak_flops_for("bf16")
    subprocess.run(["rm", "-rf", str(scratch)], check=False)
    return row


def report(path: Path) -> str:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    gib = 2**30
    lines = ["| configuration | plan | GPU | measured allocated | MARP allocated | error | measured reserved | "
             "MARP reserved | tokens/s | MFU | loss first -> last (eval) |", "|" + " --- |" * 11]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['config']} | failed: {r['error'][:120]} |" + " |" * 9)
            continue
        err = r["predicted_allocated"] / r["allocated"] - 1 if r["allocated"] else float("nan")
        speed = f"{r['tokens_per_s']:,.0f}" if "tokens_per_s" in r else "-"
        mfu = f"{r['mfu']:.1%}" if "mfu" in r else "-"
        loss = (f"{r['loss_first']:.3f} -> {r['loss_last']:.3f} ({r['eval_loss']:.3f})"
                if r.get("eval_loss") is not None else "-")
        lines.append(f"| {r['config']} ({r['model']}, {r['method']}, seq {r['seq_len']}) | {r['plan']} | "
                     f"{r['gpu']} | {r['allocated'] / gib:.2f} GiB | {r['predicted_allocated'] / gib:.2f} GiB | "
                     f"{err:+.1%} | {r['reserved'] / gib:.2f} GiB | {r['predicted_reserved'] / gib:.2f} GiB | "
                     f"{speed} | {mfu} | {loss} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="folder for gpu_finetune.jsonl")
    parser.add_argument("--only", help="comma-separated configuration names (default: all)")
    parser.add_argument("--tiny", action="store_true", help="every configuration on a tiny model (smoke test)")
    parser.add_argument("--report", help="print the markdown table of a results file")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per configuration")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.report:
        print(report(Path(args.report)))
        return
    if args.child:
        print("RESULT " + json.dumps(run_one(args.child, args.tiny)), flush=True)
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = out / "gpu_finetune.jsonl"
    for name in (args.only.split(",") if args.only else CONFIGS):
        command = [sys.executable, __file__, "--child", name] + (["--tiny"] if args.tiny else [])
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
            found = [line[7:] for line in done.stdout.splitlines() if line.startswith("RESULT ")]
            row = json.loads(found[0]) if found else {"config": name, "error": done.stderr.strip()[-2000:]}
            (out / f"{name}.log").write_text(done.stdout + "\n" + done.stderr)
        except subprocess.TimeoutExpired:
            row = {"config": name, "error": f"timed out after {args.timeout} s"}
        with results.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(name, "error" if "error" in row else f"{row['allocated'] / 2**30:.2f} GiB allocated "
              f"(MARP {row['predicted_allocated'] / 2**30:.2f}), {row['wall_s']} s", flush=True)
    print(report(results))


if __name__ == "__main__":
    main()

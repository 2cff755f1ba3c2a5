"""The training loop every rank runs (Ray Train's `train_loop_per_worker`).

It builds the model from the job's config, applies the plan, resumes from the job's latest
checkpoint, and reports every optimizer step through `ray.train.report`: loss, tokens/s, and the
per-rank memory peak (CUDA's max_memory_reserved, or the emulated peak on a fake GPU).
"""

from __future__ import annotations

import os
import time

import torch
import torch.distributed as dist

from frenzy.train import checkpoint, memory
from frenzy.train.config import CUDA_ALLOCATOR_CONF, WorkerConfig
from frenzy.train.data import Batches
from frenzy.train.model import (apply_tensor_parallel, build_model, compute_precision, device_mesh, make_optimizer,
                                wrap_data_parallel)


def train_loop(config: dict, report=None) -> None:
    """Ray Train entry point. `report(metrics)` defaults to ray.train.report."""
    if report is None:
        import ray.train
        report = ray.train.report
    cfg = WorkerConfig.from_json(config)
    os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", CUDA_ALLOCATOR_CONF)  # read when CUDA initialises, below
    device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    memory.limit_cuda_memory(cfg)
    torch.set_num_threads(max(1, int(os.environ.get("FRENZY_WORKER_THREADS", "1"))))
    mesh = device_mesh(cfg, device.type)
    rank = dist.get_rank()
    dp_rank = mesh["dp"].get_local_rank()

    model = build_model(cfg).to(device)
    if cfg.tp > 1:
        apply_tensor_parallel(model, mesh["tp"])
    model = wrap_data_parallel(model, cfg, mesh, device)
    optimizer = make_optimizer(model, cfg)
    root = cfg.checkpoint_dir
    root.mkdir(parents=True, exist_ok=True)
    start = checkpoint.load(root, model, optimizer)
    batches = Batches(cfg, model.config.vocab_size if hasattr(model, "config") else cfg.hf_config["vocab_size"],
                      dp_rank)
    if rank == 0:
        print(f"[worker] attempt {cfg.attempt}: {cfg.model_name} dp{cfg.dp} tp{cfg.tp} zero{cfg.zero} "
              f"mb{cfg.micro_batch}x{cfg.grad_accum} on {cfg.world_size}x {cfg.gpu_type}; resuming at step {start}",
              flush=True)

    model.train()
    try:
        _train(cfg, model, optimizer, batches, device, root, start, rank, report)
    except torch.OutOfMemoryError as exc:
        raise memory.with_peak(exc) from exc


def _train(cfg: WorkerConfig, model, optimizer, batches: Batches, device: torch.device, root, start: int, rank: int,
           report) -> None:
    excess = None
    for step in range(start + 1, cfg.steps + 1):
        began = time.perf_counter()
        memory.check_fake_capacity(cfg, step)
        excess = memory.hold_emulated_excess(cfg, step) if excess is None else excess
        loss_sum = torch.zeros((), device=device)
        for micro in range(cfg.grad_accum):
            ids = batches.get(step, micro).to(device)
            with compute_precision(cfg, device):
                loss = model(input_ids=ids, labels=ids).loss
            (loss / cfg.grad_accum).backward()
            loss_sum += loss.detach().float()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        loss_mean = loss_sum / cfg.grad_accum
        dist.all_reduce(loss_mean, op=dist.ReduceOp.AVG) if dist.get_backend() != "gloo" else (
            dist.all_reduce(loss_mean), loss_mean.div_(dist.get_world_size()))
        if cfg.step_delay_s:
            time.sleep(cfg.step_delay_s)
        if step == 1 or step % cfg.checkpoint_every == 0 or step == cfg.steps:
            checkpoint.save(root, step, model, optimizer)
        elapsed = time.perf_counter() - began
        peak, source = memory.peak_bytes(cfg)
        report({"step": step, "total_steps": cfg.steps, "loss": round(float(loss_mean), 5),
                "tokens_per_s": round(cfg.global_batch * cfg.seq_len / elapsed, 1), "step_time_s": round(elapsed, 3),
                "peak_bytes": peak, "peak_source": source, "rank": rank, "attempt": cfg.attempt,
                "checkpoint_step": checkpoint.latest_step(root)})

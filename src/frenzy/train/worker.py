"""The training loop every rank runs (Ray Train's `train_loop_per_worker`).

It builds the model from the job's config, applies the plan, prepares the job's data, resumes from
the job's latest checkpoint, and reports every optimizer step through `ray.train.report`: loss,
validation loss when due, tokens/s and the per-rank memory peak (CUDA's max_memory_reserved, or the
live tensor bytes measured on a fake GPU). At the end it writes the artifacts the user downloads.
"""

from __future__ import annotations

import functools
import os
import time

import torch
import torch.distributed as dist

from frenzy.train import checkpoint, cpu_matmul, export, manifest, memory, pipeline
from frenzy.train.batches import Batches, loss_tokens
from frenzy.train.config import CUDA_ALLOCATOR_CONF, MERGED, WorkerConfig
from frenzy.train.evaluate import validation_loss
from frenzy.train.model import apply_tensor_parallel, build_model, compute_precision, device_mesh, wrap_data_parallel
from frenzy.train.optimization import clip_gradients, make_optimizer, make_schedule, suit_plan


def prepare_data(cfg: WorkerConfig):
    """The job's examples, exactly as the server checked them at submission (None: synthetic)."""
    if cfg.data is None:
        return None
    from frenzy.data.prepare import prepare
    from frenzy.data.spec import DataSpec
    from frenzy.data.tokenizer import load_tokenizer

    return prepare(DataSpec.from_json(cfg.data), load_tokenizer(cfg.local_weights, cfg.hf_config), cfg.seq_len)


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
    mesh = pipeline.device_mesh(cfg, device.type) if cfg.pp > 1 else device_mesh(cfg, device.type)

    model = build_model(cfg)
    stage = pipeline.stage_of(mesh, model) if cfg.pp > 1 else None
    if stage is not None:
        pipeline.keep_stage(model, stage, functools.partial(compute_precision, cfg, device))
    model = model.to(device)
    inner = model  # under any data-parallel wrapper: the pipeline reads its parts by their names
    if cfg.tp > 1:
        apply_tensor_parallel(model, mesh["tp"], cfg)
    model = (pipeline.wrap_data_parallel if stage else wrap_data_parallel)(model, cfg, mesh, device)
    optimizer = make_optimizer(model, cfg)
    cfg.checkpoint_dir.mkdir(parents=True, exist_ok=True)
    checkpoint.claim(cfg.checkpoint_dir, cfg.attempt)
    start = checkpoint.load(cfg.checkpoint_dir, model, optimizer)
    suit_plan(optimizer, cfg)
    prepared = prepare_data(cfg)
    batches = Batches(cfg, inner.config.vocab_size, mesh["dp"].get_local_rank(), prepared)
    if dist.get_rank() == 0:
        print(f"[worker] attempt {cfg.attempt}: {cfg.model_name} dp{cfg.dp} tp{cfg.tp}"
              f"{'+sp' if cfg.sequence_parallel else ''} pp{cfg.pp} zero{cfg.zero} "
              f"mb{cfg.micro_batch}x{cfg.grad_accum} on {cfg.world_size}x {cfg.gpu_type}; resuming at step {start}",
              flush=True)
    model.train()
    loop = _Loop(cfg, model, optimizer, batches, device, report, prepared)
    if stage is not None:
        loop.pipe = pipeline.PipelineStep(cfg, model, inner, stage, mesh, device)
    try:
        with cpu_matmul.products_in_fp32(device):
            history = loop.run(start)
    except torch.OutOfMemoryError as exc:
        raise memory.with_peak(exc) from exc
    hand_back(model, cfg, history, prepared, cfg.steps)


def hand_back(model, cfg: WorkerConfig, history: dict, prepared, step: int) -> None:
    """Write the artifacts of the weights as they are after `step` (collective: every rank calls it)."""
    files = export.write_artifacts(model, cfg, cfg.artifacts_dir)
    if dist.get_rank() == 0:
        if cfg.merge_lora:
            files += [f"{MERGED}/{f}" for f in export.merge_lora(cfg.artifacts_dir, cfg.local_weights,
                                                                 cfg.artifacts_dir / MERGED)]
        manifest.write(cfg, history, prepared.report if prepared else None, files, step)
    dist.barrier()


class _Loop:
    def __init__(self, cfg: WorkerConfig, model, optimizer, batches: Batches, device: torch.device, report,
                 prepared):
        self.cfg, self.model, self.optimizer, self.batches, self.device = cfg, model, optimizer, batches, device
        self.report, self.prepared = report, prepared
        self.precision = functools.partial(compute_precision, cfg, device)
        self.meter = memory.StepMeter(cfg, model, optimizer, busiest_rank=cfg.pp > 1)
        self.pipe: pipeline.PipelineStep | None = None

    def run(self, start: int) -> dict:
        cfg = self.cfg
        schedule = make_schedule(self.optimizer, cfg, start)
        history = {"loss": [], "eval_loss": []}
        excess = None  # CUDA only: the emulated extra need of a job (emulation.peak_factor), held from step 2 on
        for step in range(start + 1, cfg.steps + 1):
            began = time.perf_counter()
            excess = memory.hold_emulated_excess(cfg, step) if excess is None else excess
            with self.meter.measuring(step):
                loss, grad_norm = self._step(step)
            memory.check_fake_capacity(cfg, step, self.meter.peak()[0])
            lr = schedule.get_last_lr()[0]
            schedule.step()
            if cfg.step_delay_s:
                time.sleep(cfg.step_delay_s)
            if step == 1 or step % cfg.checkpoint_every == 0 or step == cfg.steps:
                checkpoint.save(cfg.checkpoint_dir, step, self.model, self.optimizer, cfg.attempt)
                if cfg.export_every_checkpoint and step < cfg.steps:  # the last step's export follows the loop
                    hand_back(self.model, cfg, history, self.prepared, step)
            elapsed = time.perf_counter() - began
            metrics = {"step": step, "total_steps": cfg.steps, "loss": round(loss, 5), "lr": lr,
                       "tokens_per_s": round(cfg.global_batch * cfg.seq_len / elapsed, 1),
                       "step_time_s": round(elapsed, 3), "rank": dist.get_rank(), "attempt": cfg.attempt,
                       "checkpoint_step": checkpoint.latest_step(cfg.checkpoint_dir)}
            if grad_norm is not None:
                metrics["grad_norm"] = round(grad_norm, 5)
            history["loss"].append([step, metrics["loss"]])
            if step == cfg.steps or (cfg.eval_every and step % cfg.eval_every == 0):
                eval_loss = self.pipe.validation_loss(self.batches.eval_chunks()) if self.pipe else \
                    validation_loss(self.model, self.batches.eval_chunks(), self.device, self.precision)
                if eval_loss is not None:
                    metrics["eval_loss"] = round(eval_loss, 5)
                    history["eval_loss"].append([step, eval_loss])
            metrics["peak_bytes"], metrics["peak_source"] = self.meter.peak()
            self.report(metrics)
        return history

    def _step(self, step: int) -> tuple[float, float | None]:
        """One optimizer step; returns the global batch's mean loss per loss token and the gradient norm."""
        if self.pipe is not None:
            return self.pipe.step(step, self.batches, self.optimizer)
        cfg = self.cfg
        total_tokens = self.batches.step_loss_tokens(step)
        loss_sum = torch.zeros((), device=self.device, dtype=torch.float64)
        for micro in range(cfg.grad_accum):
            ids, labels = (t.to(self.device) for t in self.batches.get(step, micro))
            tokens = int(loss_tokens(labels).sum())
            with self.precision():
                loss = self.model(input_ids=ids, labels=labels).loss
            if tokens == 0:  # every label ignored: the loss is NaN, and nothing here should move the weights
                loss = loss.nan_to_num(0.0) * 0
            # Data-parallel reduction averages gradients over dp ranks: scale back up by dp.
            (loss * (tokens * cfg.dp / total_tokens)).backward()
            loss_sum += loss.detach().double() * tokens
        grad_norm = clip_gradients(self.model, cfg)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        dist.all_reduce(loss_sum)
        return float(loss_sum) / total_tokens / cfg.tp, grad_norm

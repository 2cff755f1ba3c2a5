"""`frenzy`: predict training memory, plan jobs, and (with extras) trace, simulate and serve.

Commands that only predict import neither torch nor ray.
"""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer
from rich.console import Console

from frenzy.cli.options import (
    USER_ERRORS, GpuCatalog, TrainingFlags, fail, parse_recompute, parse_zero, use_gpu_catalog,
)
from frenzy.cli.render import memory_table, plans_table
from frenzy.core import catalog
from frenzy.core.hf_config import load_model
from frenzy.core.job import JobSpec, context_warning
from frenzy.core.plan import ParallelPlan
from frenzy.core.training import recompute_warning
from frenzy.core.units import gib

app = typer.Typer(help="Frenzy: memory-aware serverless LLM training for heterogeneous GPU clusters.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
console = Console(width=None if Console().is_terminal else 120)

Model = Annotated[str, typer.Argument(help="catalog name (e.g. llama-3.1-8b) or path to a HF config.json")]
Precision = Annotated[str, typer.Option(help="fp32 | fp16-mixed | bf16-mixed | bf16 (pure)")]
Method = Annotated[str, typer.Option(help="full | lora | qlora")]
LoraRank = Annotated[int, typer.Option(help="LoRA rank")]
LoraTargets = Annotated[str, typer.Option(help="comma list of q,k,v,o,gate,up,down, or all-linear")]
OptimizerOpt = Annotated[str, typer.Option("--optimizer", help="adamw | adamw-fused | adamw-8bit | sgd")]
AttentionOpt = Annotated[str, typer.Option(help="flash | sdpa | eager")]
Json = Annotated[bool, typer.Option("--json", help="print one JSON object (stable interface)")]


LoraDropout = Annotated[float, typer.Option(help="LoRA dropout probability (saves a mask per adapter)")]


@app.callback()
def _root(gpu_catalog: GpuCatalog = None) -> None:
    """Frenzy: memory-aware serverless LLM training for heterogeneous GPU clusters."""
    # Reset on every invocation: the flag here (or $FRENZY_GPU_CATALOG) applies to every subcommand,
    # and a command's own --gpu-catalog overrides it.
    catalog.use_gpu_catalog(gpu_catalog)


def _warnings(job: JobSpec, plan: ParallelPlan | None = None) -> list[str]:
    """What may hurt the job without stopping it, printed on stderr so stdout stays one JSON object."""
    recompute = recompute_warning(plan.recompute, job.training.attention) if plan else None
    found = [w for w in (context_warning(job), recompute) if w]
    for warning in found:
        typer.echo(f"warning: {warning}", err=True)
    return found


def _training(precision, method, lora_rank, lora_targets, optimizer, attention, lora_dropout=0.0):
    return TrainingFlags(precision, method, lora_rank, lora_targets, optimizer, attention, lora_dropout).to_config()


@app.command()
def memory(
    model: Model,
    micro_batch: Annotated[int, typer.Option(help="sequences per GPU per forward")] = 1,
    seq: Annotated[int, typer.Option(help="sequence length in tokens")] = 2048,
    precision: Precision = "bf16-mixed",
    method: Method = "full",
    lora_rank: LoraRank = 8,
    lora_targets: LoraTargets = "q,v",
    lora_dropout: LoraDropout = 0.0,
    zero: Annotated[int, typer.Option(help="ZeRO stage 0-3 (3 = FSDP full shard)")] = 0,
    dp: Annotated[int, typer.Option(help="data-parallel degree")] = 1,
    tp: Annotated[int, typer.Option(help="tensor-parallel degree")] = 1,
    pp: Annotated[int, typer.Option(help="pipeline-parallel degree")] = 1,
    sequence_parallel: Annotated[bool, typer.Option("--sequence-parallel", help="Megatron sequence parallelism")] = False,
    recompute: Annotated[str, typer.Option(
        help="none | selective (PyTorch selective checkpointing: projection and attention-kernel outputs "
             "kept) | full | attention (eager attention's core only, Korthikanti et al.)")] = "none",
    optimizer: OptimizerOpt = "adamw",
    attention: AttentionOpt = "flash",
    grad_accum: Annotated[int, typer.Option(help="micro-batches accumulated per step")] = 1,
    gpu: Annotated[Optional[str], typer.Option(help="GPU type to check the fit against")] = None,
    trace: Annotated[bool, typer.Option("--trace", help="measure by running the real step on fake tensors")] = False,
    compare: Annotated[bool, typer.Option("--compare", help="formula and trace side by side, term by term")] = False,
    as_json: Json = False,
    gpu_catalog: GpuCatalog = None,
) -> None:
    """Predict the per-GPU peak memory of one training step under one parallel plan."""
    from frenzy.memory.estimate import estimate
    from frenzy.memory.plans import check_plan

    use_gpu_catalog(gpu_catalog)
    try:
        arch = load_model(model)
        training = _training(precision, method, lora_rank, lora_targets, optimizer, attention, lora_dropout)
        plan = ParallelPlan(dp=dp, tp=tp, pp=pp, zero=parse_zero(zero), micro_batch=micro_batch,
                            grad_accum=grad_accum, recompute=parse_recompute(recompute),
                            sequence_parallel=sequence_parallel)
        job = JobSpec(model=arch, training=training, seq_len=seq, global_batch=plan.global_batch)
        check_plan(job, plan)
        gpu_type = catalog.gpu_type(gpu) if gpu else None
        results = {"MARP": estimate(job, plan, gpu_type)}
        if trace or compare:
            results["trace"] = _traced(model, training, plan, seq)
    except USER_ERRORS as exc:
        raise fail(str(exc)) from None
    warnings = _warnings(job, plan)
    result = results["trace"] if trace and not compare else results["MARP"]
    fits = None if gpu_type is None else result.required_bytes <= gpu_type.memory_bytes
    if as_json:
        out = {"model": arch.name, "params": arch.num_params, "model_source": arch.model_source,
               "plan": plan.describe(), **result.to_json(), "warnings": warnings}
        if compare:
            out["trace"] = results["trace"].to_json()
        if gpu_type is not None:
            out.update(gpu=gpu_type.name, gpu_memory_bytes=gpu_type.memory_bytes, fits=fits)
            if gpu_type.note:
                out["gpu_note"] = gpu_type.note
        print(json.dumps(out, indent=2))
        return
    console.print(arch.summary())
    if arch.profile_key:
        console.print(f"{arch.family}: no formula; activations from a per-layer profile traced once and cached")
    shown = results if compare else {"trace" if trace else "MARP": result}
    console.print(memory_table(f"Peak memory per GPU — {plan.describe()}, seq {seq}", shown))
    if trace or compare:
        console.print("The trace cannot see memory allocated inside kernels (flash-attention backward "
                      "accumulators, cuBLAS workspaces) nor the CUDA context; MARP adds them.")
    if gpu_type is not None:
        verdict = "[green]fits[/]" if fits else "[red]does not fit[/]"
        console.print(f"{gpu_type.name} ({gib(gpu_type.memory_bytes):.1f} GiB): {verdict}")
        if gpu_type.note:
            console.print(f"note on {gpu_type.name}: {gpu_type.note}")


def _traced(model: str, training, plan: ParallelPlan, seq: int):
    try:
        from frenzy.memory.trace import trace_step
    except ImportError as exc:
        raise ValueError(f"--trace needs PyTorch and transformers ({exc.name} is missing): "
                         "pip install 'frenzy[trace]'") from None
    return trace_step(model, training, plan, seq).estimate


@app.command()
def plan(
    model: Model,
    global_batch: Annotated[int, typer.Option(help="sequences per optimizer step")] = 64,
    seq: Annotated[int, typer.Option(help="sequence length in tokens")] = 2048,
    steps: Annotated[int, typer.Option(help="optimizer steps")] = 1000,
    precision: Precision = "bf16-mixed",
    method: Method = "full",
    lora_rank: LoraRank = 8,
    lora_targets: LoraTargets = "q,v",
    lora_dropout: LoraDropout = 0.0,
    optimizer: OptimizerOpt = "adamw",
    attention: AttentionOpt = "flash",
    recompute: Annotated[Optional[str], typer.Option(help="fix recomputation (default: planner chooses)")] = None,
    gpus: Annotated[Optional[str], typer.Option(help="comma list of GPU types (default: whole catalog)")] = None,
    objective: Annotated[str, typer.Option(help="time | cost")] = "time",
    max_gpus: Annotated[int, typer.Option(help="largest GPU count to consider")] = 64,
    top: Annotated[int, typer.Option(help="plans to show")] = 15,
    as_json: Json = False,
    gpu_catalog: GpuCatalog = None,
) -> None:
    """Rank the plans that fit, per GPU type: GPU count, dp x tp x pp, ZeRO, micro-batch, recomputation."""
    from frenzy.memory.plans import plan_job, plan_notes
    from frenzy.memory.ranking import rank_key

    use_gpu_catalog(gpu_catalog)
    try:
        if max_gpus < 1:
            raise ValueError(f"--max-gpus must be >= 1, got {max_gpus}")
        if top < 1:
            raise ValueError(f"--top must be >= 1 (--json prints every plan), got {top}")
        arch = load_model(model)
        training = _training(precision, method, lora_rank, lora_targets, optimizer, attention, lora_dropout)
        job = JobSpec(model=arch, training=training, seq_len=seq, global_batch=global_batch, steps=steps)
        types = ([catalog.gpu_type(g) for g in gpus.split(",") if g.strip()] if gpus
                 else list(catalog.gpu_types().values()))
        fixed = [parse_recompute(recompute)] if recompute else None
        choices = plan_job(job, types, max_gpus=max_gpus, recompute=fixed, rank=rank_key(objective, job))
    except USER_ERRORS as exc:
        raise fail(str(exc)) from None
    warnings = _warnings(job)
    if as_json:
        from frenzy.memory.ranking import predicted_cost_usd, predicted_duration_s

        plans = [dict(c.to_json(), predicted_time_s=predicted_duration_s(job, c),
                      predicted_cost_usd=predicted_cost_usd(job, c)) for c in choices]
        print(json.dumps({"model": arch.name, "params": arch.num_params, "model_source": arch.model_source,
                          "notes": plan_notes(job), "objective": objective, "plans": plans,
                          "gpu_notes": _notes(choices), "warnings": warnings}, indent=2))
        return
    console.print(arch.summary())
    for note in plan_notes(job):
        console.print(f"[yellow]{note}[/]")
    console.print(plans_table(f"Plans for global batch {global_batch} x seq {seq} x {steps} steps "
                              f"({training.precision.value}, {training.method.value}), objective {objective}",
                              choices[:top], job))
    if len(choices) > top:
        console.print(f"… {len(choices) - top} more (--top N or --json)")
    for name, note in _notes(choices[:top]).items():
        console.print(f"note on {name}: {note}")


def _notes(choices) -> dict[str, str]:
    """The catalog's caveat for each GPU type among the plans (e.g. a runtime term unmeasured there)."""
    return {c.gpu.name: c.gpu.note for c in choices if c.gpu.note}


@app.command()
def models() -> None:
    """List the bundled model catalog."""
    from rich.table import Table

    table = Table("model", "family", "params", "layers", "hidden", "heads/kv", "vocab")
    from frenzy.core.errors import InvalidConfigError

    for name in catalog.model_names():
        try:
            a = load_model(name)
        except InvalidConfigError:  # a config bundled ahead of its parser still gets listed
            table.add_row(name, str(catalog.model_config(name).get("model_type")), "-", "-", "-", "-", "-")
            continue
        table.add_row(name, a.family, f"{a.num_params / 1e9:.2f}B", str(a.num_layers), str(a.hidden_size),
                      f"{a.num_heads}/{a.num_kv_heads}", str(a.vocab_size))
    console.print(table)


@app.command()
def gpus(as_json: Json = False, gpu_catalog: GpuCatalog = None) -> None:
    """List the GPU catalog: the bundled types with the user's GPU catalog file applied."""
    from rich.table import Table

    use_gpu_catalog(gpu_catalog)
    types = list(catalog.gpu_types().values())
    if as_json:
        print(json.dumps({"user_gpu_catalog": catalog.user_gpu_catalog(), "gpus": [
            {"name": g.name, "aliases": list(g.aliases), "memory_bytes": g.memory_bytes, "peak_flops": g.peak_flops,
             "hbm_bandwidth_bytes_s": g.hbm_bandwidth_bytes_s, "intra_node_link": g.intra_node_link,
             "intra_node_bandwidth_bytes_s": g.intra_node_bandwidth_bytes_s, "gpus_per_node": g.gpus_per_node,
             "supports_bf16": g.supports_bf16, "price_per_gpu_hour_usd": g.price_per_gpu_hour_usd,
             "source": g.source, "note": g.note} for g in types]}, indent=2))
        return
    table = Table("GPU type", "memory GiB", "bf16 TFLOP/s", "HBM GB/s", "link", "per node", "$/GPU-h")
    for g in types:
        table.add_row(g.name + (" *" if g.note else ""), f"{gib(g.memory_bytes):.1f}",
                      f"{g.peak_flops_for('bf16') / 1e12:.0f}", f"{g.hbm_bandwidth_bytes_s / 1e9:.0f}",
                      g.intra_node_link, str(g.gpus_per_node), f"{g.price_per_gpu_hour_usd:.2f}")
    console.print(table)
    for g in types:
        if g.note:
            console.print(f"* {g.name}: {g.note}")
    if catalog.user_gpu_catalog():
        console.print(f"with the user GPU catalog {catalog.user_gpu_catalog()} applied")


# ---- command groups from other subsystems register here, one line each ----------------------
# (each module exposes `register(app)`; keep these imports light: heavy imports go inside commands)
from frenzy.cli.serve import register as _register_serve; _register_serve(app)  # noqa: E402,E702
from frenzy.cli.simulate import register as _register_simulate; _register_simulate(app)  # noqa: E402,E702
from frenzy.cli.artifacts import register as _register_artifacts; _register_artifacts(app)  # noqa: E402,E702
from frenzy.cli.auth import register as _register_auth; _register_auth(app)  # noqa: E402,E702


def main() -> None:
    app()


if __name__ == "__main__":
    main()

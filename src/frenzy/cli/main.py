"""`frenzy`: predict training memory, plan jobs, and (with extras) trace, simulate and serve.

Commands that only predict import neither torch nor ray.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from frenzy import __version__
from frenzy.cli.options import (
    USER_ERRORS, AttentionChoice, GpuCatalog, MethodChoice, ObjectiveChoice, OptimizerChoice, PrecisionChoice,
    RecomputeChoice, TrainingFlags, ZeroChoice, complete_gpu, complete_model, fail, parse_recompute, parse_zero,
    use_gpu_catalog,
)
from frenzy.cli.output import FrenzyGroup, Json, console, emit
from frenzy.cli.render import by_gpu_type, memory_table, not_runnable_reasons, plans_legend, plans_table
from frenzy.core import catalog
from frenzy.core.hf_config import load_model
from frenzy.core.job import JobSpec, context_warning
from frenzy.core.plan import ParallelPlan
from frenzy.core.training import recompute_warning
from frenzy.core.units import gib
from frenzy.memory.plans import DEFAULT_FASTER
from frenzy.memory.zero import ZERO_HELP

app = typer.Typer(cls=FrenzyGroup, help="Frenzy: memory-aware serverless LLM training for heterogeneous GPU clusters.",
                  no_args_is_help=True, pretty_exceptions_enable=False)

Model = Annotated[str, typer.Argument(help="catalog name (e.g. llama-3.1-8b) or path to a HF config.json",
                                      autocompletion=complete_model)]
Precision = Annotated[PrecisionChoice, typer.Option(help="fp32, fp16/bf16 mixed precision, or pure bf16")]
Method = Annotated[MethodChoice, typer.Option(help="full fine-tuning, LoRA or QLoRA")]
LoraRank = Annotated[int, typer.Option(help="LoRA rank")]
LoraTargets = Annotated[str, typer.Option(help="comma list of q,k,v,o,gate,up,down, or all-linear")]
OptimizerOpt = Annotated[OptimizerChoice, typer.Option("--optimizer", help="optimizer (state size per parameter)")]
AttentionOpt = Annotated[AttentionChoice, typer.Option(help="attention kernel (eager stores the s x s scores)")]


LoraDropout = Annotated[float, typer.Option(help="LoRA dropout probability (saves a mask per adapter)")]


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"frenzy {__version__}")
        raise typer.Exit()


@app.callback()
def _root(gpu_catalog: GpuCatalog = None,
          version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_print_version,
                                                help="print the version and exit")] = False) -> None:
    """Frenzy: memory-aware serverless LLM training for heterogeneous GPU clusters."""
    # Reset on every invocation: the flag here (or $FRENZY_GPU_CATALOG) applies to every subcommand,
    # and a command's own --gpu-catalog overrides it.
    catalog.use_gpu_catalog(gpu_catalog)


def _warnings(job: JobSpec, *extra: str | None) -> list[str]:
    """What may hurt the job without stopping it, printed on stderr so stdout stays one JSON object."""
    found = [w for w in (context_warning(job), *extra) if w]
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
    precision: Precision = PrecisionChoice("bf16-mixed"),
    method: Method = MethodChoice("full"),
    lora_rank: LoraRank = 8,
    lora_targets: LoraTargets = "q,v",
    lora_dropout: LoraDropout = 0.0,
    zero: Annotated[ZeroChoice, typer.Option(help=ZERO_HELP)] = ZeroChoice("0"),
    dp: Annotated[int, typer.Option(help="data-parallel degree")] = 1,
    tp: Annotated[int, typer.Option(help="tensor-parallel degree")] = 1,
    pp: Annotated[int, typer.Option(help="pipeline-parallel degree")] = 1,
    sequence_parallel: Annotated[bool, typer.Option("--sequence-parallel", help="Megatron sequence parallelism")] = False,
    recompute: Annotated[RecomputeChoice, typer.Option(
        help="none | selective (PyTorch selective checkpointing: projection and attention-kernel outputs "
             "kept) | full | attention (eager attention's core only, Korthikanti et al.)")] = RecomputeChoice("none"),
    optimizer: OptimizerOpt = OptimizerChoice("adamw"),
    attention: AttentionOpt = AttentionChoice("flash"),
    grad_accum: Annotated[int, typer.Option(help="micro-batches accumulated per step")] = 1,
    gpu: Annotated[Optional[str], typer.Option(help="GPU type to check the fit against",
                                               autocompletion=complete_gpu)] = None,
    trace: Annotated[bool, typer.Option("--trace", help="measure by running the real step on fake tensors")] = False,
    compare: Annotated[bool, typer.Option("--compare", help="formula and trace side by side, term by term")] = False,
    as_json: Json = False,
    gpu_catalog: GpuCatalog = None,
) -> None:
    """Predict the per-GPU peak memory of one training step under one parallel plan."""
    from frenzy.core.worker_support import unsupported_reason
    from frenzy.memory.fit import DEFAULT_SAFETY_MARGIN, fit_problem, usable_bytes
    from frenzy.memory.plans import check_plan, leaner_precision_mode
    from frenzy.memory.zero import zero_sharding

    use_gpu_catalog(gpu_catalog)
    try:
        arch = load_model(model)
        training = _training(precision, method, lora_rank, lora_targets, optimizer, attention, lora_dropout)
        asked = ParallelPlan(dp=dp, tp=tp, pp=pp, zero=parse_zero(zero), micro_batch=micro_batch,
                             grad_accum=grad_accum, recompute=parse_recompute(recompute),
                             sequence_parallel=sequence_parallel)
        job = JobSpec(model=arch, training=training, seq_len=seq, global_batch=asked.global_batch)
        check_plan(job, asked)
        plan, formula = leaner_precision_mode(job, asked)  # the mixed-precision mode the planner gives it
        gpu_type = catalog.gpu_type(gpu) if gpu else None
        results = {"MARP": formula}
        if trace or compare:
            results["trace"] = _traced(model, training, plan, seq)
    except USER_ERRORS as exc:
        raise fail(str(exc)) from None
    warnings = _warnings(job, _zero_warning(int(parse_zero(zero)), dp),
                         recompute_warning(plan.recompute, job.training.attention))
    result = results["trace"] if trace and not compare else results["MARP"]
    problem = None if gpu_type is None else fit_problem(training, result.required_bytes, gpu_type)
    unsupported, sharding = unsupported_reason(job, plan), zero_sharding(training, plan)
    if as_json:
        out = {"model": arch.name, "params": arch.num_params, "model_source": arch.model_source,
               "plan": plan.describe(), "mixed_precision": plan.mixed_precision.value, **result.to_json(),
               "zero_sharding": sharding.to_json(), "runnable": unsupported is None,
               "not_runnable_reason": unsupported, "warnings": warnings}
        if compare:
            out["trace"] = results["trace"].to_json()
        if gpu_type is not None:
            out.update(gpu=gpu_type.name, gpu_memory_bytes=gpu_type.memory_bytes, safety_margin=DEFAULT_SAFETY_MARGIN,
                       usable_bytes=usable_bytes(gpu_type), fits=problem is None, fit_problem=problem)
            if gpu_type.note:
                out["gpu_note"] = gpu_type.note
        emit(out)
        return
    console.print(arch.summary())
    if arch.profile_key:
        console.print(f"{arch.family}: no formula; activations from a per-layer profile traced once and cached")
    shown = results if compare else {"trace" if trace else "MARP": result}
    console.print(memory_table(f"Peak memory per GPU — {plan.describe()}, seq {seq}", shown))
    console.print(sharding.describe())
    if trace or compare:
        console.print("The trace cannot see memory allocated inside kernels (flash-attention backward "
                      "accumulators, cuBLAS workspaces) nor the CUDA context; MARP adds them.")
    if unsupported:
        console.print(f"[yellow]the training worker does not run this plan: {unsupported}[/]")
    if gpu_type is not None:
        _print_fit(gpu_type, result.required_bytes, problem)


def _zero_warning(zero: int, dp: int) -> str | None:
    if zero > 0 and dp == 1:
        return f"--zero {zero} with --dp 1 shards nothing (ZeRO shards across data-parallel ranks); use --dp > 1"
    return None


def _print_fit(gpu_type, required_bytes: int, problem: str | None) -> None:
    """The fit verdict by the planner's rule (memory.fit): required bytes within the GPU less the margin."""
    from frenzy.memory.fit import DEFAULT_SAFETY_MARGIN, usable_bytes

    usable = usable_bytes(gpu_type)
    if problem is None:
        console.print(f"{gpu_type.name} ({gib(gpu_type.memory_bytes):.1f} GiB): [green]fits[/] — needs "
                      f"{gib(required_bytes):.1f} GiB of {gib(usable):.1f} GiB usable after the "
                      f"{DEFAULT_SAFETY_MARGIN:.0%} safety margin, {gib(usable - required_bytes):.1f} GiB free")
    else:
        console.print(f"{gpu_type.name} ({gib(gpu_type.memory_bytes):.1f} GiB): [red]does not fit[/] — {problem}")
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
    precision: Precision = PrecisionChoice("bf16-mixed"),
    method: Method = MethodChoice("full"),
    lora_rank: LoraRank = 8,
    lora_targets: LoraTargets = "q,v",
    lora_dropout: LoraDropout = 0.0,
    optimizer: OptimizerOpt = OptimizerChoice("adamw"),
    attention: AttentionOpt = AttentionChoice("flash"),
    recompute: Annotated[Optional[RecomputeChoice], typer.Option(
        help="fix recomputation (default: planner chooses)")] = None,
    gpus: Annotated[Optional[str], typer.Option(help="comma list of GPU types (default: whole catalog)")] = None,
    objective: Annotated[ObjectiveChoice, typer.Option(
        help="rank by finish time or by cost")] = ObjectiveChoice("time"),
    max_gpus: Annotated[int, typer.Option(help="largest GPU count to consider")] = 64,
    faster: Annotated[int, typer.Option(help="plans per GPU type shown after the one on the fewest GPUs, "
                                              "each predicted faster than it")] = DEFAULT_FASTER,
    top: Annotated[int, typer.Option(help="GPU types to show, best first (--json prints all)")] = 5,
    show_all: Annotated[bool, typer.Option("--all", help="also plans the training worker does not run, "
                                                         "marked with the reason")] = False,
    as_json: Json = False,
    gpu_catalog: GpuCatalog = None,
) -> None:
    """Plans that fit, per GPU type: the fewest GPUs first, then faster plans (dp x tp x pp, ZeRO,
    micro-batch, recomputation), with the memory each needs and leaves free."""
    from frenzy.memory.fit import dtype_problem
    from frenzy.memory.plans import plan_job, plan_notes
    from frenzy.memory.ranking import rank_key

    use_gpu_catalog(gpu_catalog)
    try:
        for name, value, least in (("--max-gpus", max_gpus, 1), ("--top", top, 1), ("--faster", faster, 0)):
            if value < least:
                raise ValueError(f"{name} must be >= {least}, got {value}")
        arch = load_model(model)
        training = _training(precision, method, lora_rank, lora_targets, optimizer, attention, lora_dropout)
        job = JobSpec(model=arch, training=training, seq_len=seq, global_batch=global_batch, steps=steps)
        types = ([catalog.gpu_type(g) for g in gpus.split(",") if g.strip()] if gpus
                 else list(catalog.gpu_types().values()))
        fixed = [parse_recompute(recompute)] if recompute else None
        choices = plan_job(job, types, max_gpus=max_gpus, recompute=fixed, rank=rank_key(objective, job),
                           faster=faster, include_unrunnable=show_all)
    except USER_ERRORS as exc:
        raise fail(str(exc)) from None
    warnings = _warnings(job)
    if as_json:
        from frenzy.memory.ranking import predicted_cost_usd, predicted_duration_s

        plans = [dict(c.to_json(), predicted_time_s=predicted_duration_s(job, c),
                      predicted_cost_usd=predicted_cost_usd(job, c)) for c in choices]
        emit({"model": arch.name, "params": arch.num_params, "model_source": arch.model_source,
              "notes": plan_notes(job), "objective": objective, "plans": plans,
              "gpu_notes": _notes(choices), "warnings": warnings})
        return
    console.print(arch.summary())
    for note in plan_notes(job):
        console.print(f"[yellow]{note}[/]")
    grouped = by_gpu_type(choices)
    shown = [c for group in grouped[:top] for c in group]
    console.print(plans_table(f"Plans for global batch {global_batch} x seq {seq} x {steps} steps "
                              f"({training.precision.value}, {training.method.value}), objective {objective}",
                              shown, job, show_reason=show_all))
    console.print(plans_legend(faster))
    if len(grouped) > top:
        console.print(f"… {len(grouped) - top} more GPU type(s) (--top N or --json)")
    if not show_all:
        console.print("[dim]only plans the training worker runs; --all adds the others, marked not runnable[/]")
    for number, reason in enumerate(not_runnable_reasons(shown), 1):
        console.print(f"runs no ({number}): not runnable here: {reason}")
    no_dtype = [g.name for g in types if dtype_problem(training, g)]
    if no_dtype:
        console.print(f"[dim]not planned, no bf16 ({training.precision.value}): {', '.join(no_dtype)}; "
                      "--precision fp16-mixed plans them[/]")
    for name, note in _notes(shown).items():
        console.print(f"note on {name}: {note}")


def _notes(choices) -> dict[str, str]:
    """The catalog's caveat for each GPU type among the plans (e.g. a runtime term unmeasured there)."""
    return {c.gpu.name: c.gpu.note for c in choices if c.gpu.note}


@app.command()
def models(word: Annotated[Optional[str], typer.Argument(
               help="only models whose name or family contains this word (case-insensitive)")] = None,
           as_json: Json = False) -> None:
    """List the bundled model catalog."""
    from rich.table import Table

    rows = [row for row in (_model_row(name) for name in catalog.model_names()) if _matches(row, word)]
    if not rows:
        raise fail(f"no bundled model's name or family contains '{word}'; `frenzy models` lists them all")
    if as_json:
        emit({"models": rows})
        return
    table = Table("model", "family", "params", "layers", "hidden", "heads/kv", "vocab")
    for r in rows:
        if r["params"] is None:  # a config bundled ahead of its parser still gets listed
            table.add_row(r["name"], str(r["family"]), "-", "-", "-", "-", "-")
            continue
        table.add_row(r["name"], r["family"], f"{r['params'] / 1e9:.2f}B", str(r["layers"]), str(r["hidden_size"]),
                      f"{r['heads']}/{r['kv_heads']}", str(r["vocab_size"]))
    console.print(table)


def _model_row(name: str) -> dict:
    """One catalog model as a script sees it; None where the config has no parser yet."""
    from frenzy.core.errors import InvalidConfigError

    try:
        a = load_model(name)
    except InvalidConfigError:
        return {"name": name, "family": catalog.model_config(name).get("model_type"), "params": None,
                "layers": None, "hidden_size": None, "heads": None, "kv_heads": None, "vocab_size": None}
    return {"name": name, "family": a.family, "params": a.num_params, "layers": a.num_layers,
            "hidden_size": a.hidden_size, "heads": a.num_heads, "kv_heads": a.num_kv_heads,
            "vocab_size": a.vocab_size}


def _matches(row: dict, word: Optional[str]) -> bool:
    return not word or any(word.lower() in str(row[k] or "").lower() for k in ("name", "family"))


@app.command()
def gpus(as_json: Json = False, gpu_catalog: GpuCatalog = None) -> None:
    """List the GPU catalog: the bundled types with the user's GPU catalog file applied."""
    from rich.table import Table

    use_gpu_catalog(gpu_catalog)
    types = list(catalog.gpu_types().values())
    if as_json:
        emit({"user_gpu_catalog": catalog.user_gpu_catalog(), "gpus": [
            {"name": g.name, "aliases": list(g.aliases), "memory_bytes": g.memory_bytes, "peak_flops": g.peak_flops,
             "hbm_bandwidth_bytes_s": g.hbm_bandwidth_bytes_s, "intra_node_link": g.intra_node_link,
             "intra_node_bandwidth_bytes_s": g.intra_node_bandwidth_bytes_s, "gpus_per_node": g.gpus_per_node,
             "supports_bf16": g.supports_bf16, "price_per_gpu_hour_usd": g.price_per_gpu_hour_usd,
             "source": g.source, "note": g.note} for g in types]})
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
from frenzy.cli.teams import register as _register_teams; _register_teams(app)  # noqa: E402,E702


def main() -> None:
    app()


if __name__ == "__main__":
    main()

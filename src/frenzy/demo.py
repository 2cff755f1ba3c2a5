"""`make demo`: Frenzy's main job on embedded defaults — plans for three well-known models."""

from __future__ import annotations

from rich.console import Console

from frenzy.cli.render import plans_table
from frenzy.core import catalog
from frenzy.core.hf_config import load_model
from frenzy.core.job import JobSpec
from frenzy.core.training import Method, TrainingConfig
from frenzy.memory.plans import plan_job

DEMO_JOBS = [  # (model, global batch, sequence length, method)
    ("meta-llama/Llama-3.1-8B", 64, 4096, Method.FULL),
    ("Qwen/Qwen2.5-14B", 32, 2048, Method.LORA),
    ("mistralai/Mixtral-8x7B-v0.1", 64, 4096, Method.FULL),
]


def main() -> None:
    console = Console(width=None if Console().is_terminal else 120)
    gpus = list(catalog.gpu_types().values())
    for name, batch, seq, method in DEMO_JOBS:
        job = JobSpec(model=load_model(name), training=TrainingConfig(method=method), seq_len=seq, global_batch=batch)
        console.print(job.model.summary())
        title = f"frenzy plan {name} --global-batch {batch} --seq {seq} --method {method.value}"
        console.print(plans_table(title, plan_job(job, gpus)[:8]))
        console.print()


if __name__ == "__main__":
    main()

"""Activation bytes per token per decoder layer, per architecture: MARP's inventory beside what the
fake-tensor trace measures for one middle layer of the real Hugging Face model.

Written to docs/ACCURACY.md as coefficients of the hidden size h (and the MLP width I), for
full fine-tuning with the fused (flash) attention kernel, in pure bf16 and bf16-mixed.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import write_section  # noqa: E402

from frenzy.core.hf_config import load_model  # noqa: E402
from frenzy.core.plan import ParallelPlan  # noqa: E402
from frenzy.core.training import Precision, TrainingConfig  # noqa: E402
from frenzy.memory.layer_inventory import layer_inventory  # noqa: E402

MODELS = ["meta-llama/Llama-3.2-1B", "mistralai/Mistral-7B-v0.1", "Qwen/Qwen2.5-0.5B", "Qwen/Qwen3-0.6B",
          "google/gemma-2b", "microsoft/Phi-3-mini-4k-instruct", "openai-community/gpt2", "EleutherAI/pythia-160m",
          "facebook/opt-125m", "microsoft/phi-1_5", "stabilityai/stablelm-2-1_6b", "bigscience/bloom-560m"]
SEQ, MICRO = 512, 1


def traced_per_layer(model: str, training: TrainingConfig) -> int | None:
    try:
        from frenzy.memory.trace import trace_step
    except ImportError:
        return None
    return trace_step(model, training, ParallelPlan(micro_batch=MICRO), SEQ).activation_bytes_per_layer // (MICRO * SEQ)


def main() -> None:
    rows = ["| model | precision | MARP B/token/layer | = x h | traced | largest items (B/token) |",
            "|---|---|---:|---:|---:|---|"]
    for name in MODELS:
        arch = load_model(name)
        for precision in (Precision.BF16, Precision.BF16_MIXED):
            training = TrainingConfig(precision=precision)
            inventory = layer_inventory(arch, training, ParallelPlan(micro_batch=MICRO), SEQ)
            total = sum(inventory.values())
            top = ", ".join(f"{k} {v}" for k, v in sorted(inventory.items(), key=lambda x: -x[1])[:4])
            traced = traced_per_layer(name, training)
            rows.append(f"| {name} (h={arch.hidden_size}, I={arch.intermediate_size}) | {precision.value} | {total} | "
                        f"{total / arch.hidden_size:.1f} | {traced if traced is not None else 'n/a'} | {top} |")
            print(rows[-1], flush=True)
    text = ("## Activation coefficients per architecture\n\nBytes one decoder layer keeps for backward per token "
            f"(full fine-tuning, flash/SDPA kernel, micro-batch {MICRO}, sequence {SEQ}), from MARP's inventory "
            "(frenzy.memory.layer_inventory.layer_inventory) and as measured by the trace for one middle layer of "
            "the real model (growth of live forward bytes across the layer, which also counts the layer's "
            "residual output where it outlives the layer).\n\n" + "\n".join(rows))
    write_section("activation-coefficients", text, doc="docs/ACCURACY.md", command="python bench/activation_coefficients.py")


if __name__ == "__main__":
    main()

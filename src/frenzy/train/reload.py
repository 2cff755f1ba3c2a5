"""Reload what a job handed back, with the ecosystem's own loaders, and score it on the job's
validation set exactly as the trainer did: the check that the artifact is the model that trained.

A peft adapter is applied with `PeftModel.from_pretrained` to its base (the local weights it was
trained on, or the config's random initialisation rebuilt from the recorded seed); a full
fine-tune, or an adapter merged into its base, is loaded with `AutoModelForCausalLM.from_pretrained`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import torch

from frenzy.train import manifest
from frenzy.train.config import MERGED
from frenzy.train.evaluate import validation_loss
from frenzy.train.model import build_base, frozen_base_dtype, precision_context


@dataclass(frozen=True, slots=True, kw_only=True)
class ReloadResult:
    name: str
    kind: str
    first_eval_loss: float | None  # the trainer's first validation loss
    trainer_eval_loss: float | None  # its last
    reloaded_eval_loss: float | None


def load_artifact(folder: Path, merged: bool = False) -> torch.nn.Module:
    m = manifest.read(folder)
    if m.kind == "model" or merged:
        from transformers import AutoModelForCausalLM

        return AutoModelForCausalLM.from_pretrained(folder / MERGED if merged else folder, local_files_only=True)
    from peft import PeftModel

    base = build_base(m.base.config, m.base.random_init_seed or 0, m.base.local_folder)
    if int(m.plan.get("dp", 1)) == 1 or int(m.plan.get("zero", 0)) == 0:  # as model.build_model kept it
        base = base.to(frozen_base_dtype(str(m.request.get("precision"))))
    return PeftModel.from_pretrained(base, folder)


def reload_and_evaluate(folder: Path, merged: bool = False) -> ReloadResult:
    from frenzy.data.prepare import prepare
    from frenzy.data.spec import DataSpec
    from frenzy.data.tokenizer import load_tokenizer

    m = manifest.read(folder)
    evals = m.eval_history
    result = dict(name=m.name, kind="merged model" if merged else m.kind,
                  first_eval_loss=evals[0][1] if evals else None,
                  trainer_eval_loss=evals[-1][1] if evals else None, reloaded_eval_loss=None)
    if not evals or m.data_spec is None:
        return ReloadResult(**result)
    has_tokenizer = (folder / "tokenizer_config.json").is_file()
    tokenizer = load_tokenizer(str(folder) if has_tokenizer else m.base.local_folder, m.base.config)
    held_out = prepare(DataSpec.from_json(m.data_spec), tokenizer, int(m.request["seq_len"])).validation
    batch = int(m.plan.get("micro_batch", 1))  # chunking changes only the order of float sums
    chunks = [(torch.from_numpy(held_out.input_ids[i:i + batch]), torch.from_numpy(held_out.labels[i:i + batch]))
              for i in range(0, len(held_out.input_ids), batch)]
    # A job whose plan ran FSDP2's bf16 parameters evaluated in bf16 throughout: so does its reload.
    bf16_parameters = m.plan.get("mixed_precision") == "fsdp2-param"
    model = load_artifact(folder, merged)
    if bf16_parameters:
        model = model.to(torch.bfloat16)
    precision = functools.partial(precision_context, str(m.request.get("precision")), bf16_parameters,
                                  torch.device("cpu"))
    result["reloaded_eval_loss"] = validation_loss(model, chunks, torch.device("cpu"), precision)
    return ReloadResult(**result)

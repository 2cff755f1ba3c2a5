"""Measure real training-step memory on a CUDA GPU, one configuration per fresh process.

Ground truth for MARP and for the fake-tensor tracer (frenzy.memory.trace). Standalone on purpose:
it needs only torch and transformers (peft for LoRA, bitsandbytes for QLoRA / 8-bit AdamW) and
reads model configs from the catalog by path, without importing frenzy.

For every configuration it builds the model from its catalog config.json with random weights,
feeds synthetic tokens and runs the loop frenzy.memory.trace.step runs (keep the two identical):

    for step in range(2):
        for _ in range(grad_accum):
            loss = model(input_ids=ids, labels=labels, use_cache=False).loss   # autocast for *-mixed
            loss.backward()
        optimizer.step(); optimizer.zero_grad(set_to_none=True)

with the same semantics as the tracer: full fine-tuning keeps parameters in fp32 (fp32, *-mixed) or
bf16 (bf16); LoRA/QLoRA keep the frozen base in 16 bits (fp32 for fp32 training) and the adapters
(peft, lora_dropout 0) in the parameter dtype; QLoRA is bitsandbytes NF4 with double quantisation;
AdamW is foreach, adamw-fused is fused, SGD has momentum 0.9 (foreach), adamw-8bit is bitsandbytes
AdamW8bit; full and selective recomputation are the worker's (frenzy/train/recompute.py: HF gradient
checkpointing, use_reentrant=False, selective under PyTorch's SAC op policy); attention-core
recomputation checkpoints the eager attention core (nothing to do for sdpa); flash and sdpa both
use attn_implementation="sdpa". No GradScaler for fp16-mixed (as in the trace).

Peak statistics are reset at the start of step 2, so max_memory_allocated is the peak of step 2
(the traced quantity); reserved memory never shrinks (no empty_cache), so max_memory_reserved is
the peak of the whole run, and so is the device memory read after step 2. All three are read right
after step 2; `--timed-steps K` then runs K-1 more steps and reports tokens/s from the median of
steps 2..K+1 (wall time around a synchronised step).

    python bench/gpu_memory.py --out gpu_memory.csv                 # the default matrix
    python bench/gpu_memory.py --rows 0:28 --timed-steps 5 --out a.csv   # part of it, with timing
    python bench/gpu_memory.py --matrix my.csv --out results.csv    # CSV or JSON list of configs
    python bench/gpu_memory.py --print-default-matrix > matrix.json
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

CATALOG = Path(__file__).resolve().parent.parent / "src" / "frenzy" / "core" / "catalog" / "models"
DEVICE = "cuda"  # a CPU smoke test of the building code may set "cpu"

CONFIG_COLUMNS = ["model", "precision", "method", "lora_rank", "lora_targets", "optimizer", "recompute",
                  "attention", "micro_batch", "seq_len", "grad_accum", "tp"]
RESULT_COLUMNS = ["status", "error", "max_memory_allocated", "max_memory_reserved", "step1_max_memory_allocated",
                  "device_used_bytes", "device_used_source", "tokens_per_s", "step_seconds", "attn_implementation",
                  "gpu_name", "torch_version", "cuda_version", "transformers_version", "peft_version",
                  "bitsandbytes_version", "alloc_conf"]
DEFAULTS = {"precision": "bf16-mixed", "method": "full", "lora_rank": 8, "lora_targets": "q,v", "optimizer": "adamw",
            "recompute": "none", "attention": "flash", "micro_batch": 1, "seq_len": 2048, "grad_accum": 1, "tp": 1}


def _m(model, **kw) -> dict:
    return {**DEFAULTS, "model": model, **kw}


# 55 configurations over 15 catalog models that fit (or, for two marked rows, are expected not to
# fit) an 80 GB GPU: every precision, method, optimizer, recomputation and attention setting.
DEFAULT_MATRIX = [
    _m("openai-community/gpt2", seq_len=1024, micro_batch=8),
    _m("openai-community/gpt2", seq_len=1024, micro_batch=8, attention="eager"),
    _m("openai-community/gpt2", seq_len=1024, micro_batch=8, precision="fp16-mixed"),
    _m("openai-community/gpt2", seq_len=1024, micro_batch=8, precision="fp32"),
    _m("openai-community/gpt2", seq_len=1024, micro_batch=8, method="lora"),
    _m("EleutherAI/pythia-1b", micro_batch=4),
    _m("EleutherAI/pythia-1b", micro_batch=4, recompute="full"),
    _m("EleutherAI/pythia-1b", micro_batch=4, method="lora", lora_targets="all-linear"),
    _m("facebook/opt-1.3b", micro_batch=4),
    _m("facebook/opt-1.3b", micro_batch=4, attention="eager"),
    _m("facebook/opt-1.3b", micro_batch=4, method="qlora"),
    _m("bigscience/bloom-560m", micro_batch=4),  # no SDPA in transformers: eager
    _m("meta-llama/Llama-3.2-1B"),
    _m("meta-llama/Llama-3.2-1B", micro_batch=4),
    _m("meta-llama/Llama-3.2-1B", micro_batch=4, attention="eager"),
    _m("meta-llama/Llama-3.2-1B", micro_batch=4, attention="eager", recompute="attention"),
    _m("meta-llama/Llama-3.2-1B", micro_batch=4, recompute="full"),
    _m("meta-llama/Llama-3.2-1B", micro_batch=2, grad_accum=2),
    _m("meta-llama/Llama-3.2-1B", precision="fp32"),
    _m("meta-llama/Llama-3.2-1B", precision="fp16-mixed"),
    _m("meta-llama/Llama-3.2-1B", precision="bf16"),
    _m("meta-llama/Llama-3.2-1B", optimizer="adamw-fused"),
    _m("meta-llama/Llama-3.2-1B", optimizer="adamw-8bit"),
    _m("meta-llama/Llama-3.2-1B", optimizer="sgd"),
    _m("meta-llama/Llama-3.2-1B", seq_len=8192, recompute="full"),
    _m("meta-llama/Llama-3.2-1B", method="lora", micro_batch=4),
    _m("meta-llama/Llama-3.2-1B", method="qlora", micro_batch=4),
    _m("Qwen/Qwen2.5-1.5B", micro_batch=2),
    _m("Qwen/Qwen2.5-1.5B", micro_batch=2, method="lora", lora_targets="all-linear", lora_rank=16),
    _m("Qwen/Qwen3-1.7B", micro_batch=2),
    _m("Qwen/Qwen3-1.7B", micro_batch=2, precision="bf16", optimizer="adamw-8bit"),
    _m("meta-llama/Llama-3.2-3B", micro_batch=2, recompute="full"),
    _m("meta-llama/Llama-3.2-3B", micro_batch=2, method="lora"),
    _m("meta-llama/Llama-3.2-3B", precision="bf16"),
    _m("meta-llama/Llama-2-7b-hf", method="lora"),
    _m("meta-llama/Llama-2-7b-hf", method="lora", micro_batch=4),
    _m("meta-llama/Llama-2-7b-hf", method="lora", attention="eager"),
    _m("meta-llama/Llama-2-7b-hf", method="lora", recompute="full", micro_batch=8),
    _m("meta-llama/Llama-2-7b-hf", method="lora", lora_targets="all-linear", lora_rank=64),
    _m("meta-llama/Llama-2-7b-hf", method="qlora"),
    _m("meta-llama/Llama-2-7b-hf", method="qlora", micro_batch=4, recompute="full"),
    _m("meta-llama/Llama-2-7b-hf", precision="bf16", recompute="full"),
    _m("meta-llama/Llama-2-7b-hf", precision="bf16", optimizer="adamw-8bit", recompute="full"),
    _m("meta-llama/Llama-2-7b-hf", recompute="full"),  # 16 B/param: expected oom on 80 GB
    _m("mistralai/Mistral-7B-v0.1", method="lora", seq_len=4096),
    _m("mistralai/Mistral-7B-v0.1", method="qlora", seq_len=4096),
    _m("EleutherAI/gpt-j-6b", method="lora"),  # no SDPA in transformers: eager
    _m("Qwen/Qwen2.5-0.5B", micro_batch=8),
    _m("Qwen/Qwen2.5-0.5B", micro_batch=8, precision="bf16", optimizer="adamw-fused"),
    _m("Qwen/Qwen2.5-7B", method="lora", micro_batch=2),
    _m("Qwen/Qwen2.5-7B", method="lora", micro_batch=2, recompute="full", seq_len=4096),
    _m("microsoft/phi-2", micro_batch=2, recompute="full"),
    _m("microsoft/phi-2", method="lora", micro_batch=4),
    _m("Qwen/Qwen1.5-MoE-A2.7B", method="lora", micro_batch=2),
    _m("Qwen/Qwen1.5-MoE-A2.7B", method="qlora", micro_batch=2),
]


# ---- model building (mirrors frenzy.memory.trace.build) ------------------------------------------

_LLAMA = {"q": ["q_proj"], "k": ["k_proj"], "v": ["v_proj"], "o": ["o_proj"],
          "gate": ["gate_proj"], "up": ["up_proj"], "down": ["down_proj"]}
_QKV = {"q": ["query_key_value"], "k": ["query_key_value"], "v": ["query_key_value"]}
LORA_MODULES = {
    **{t: _LLAMA for t in ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "gemma", "gemma2",
                           "stablelm")},
    "gpt2": {"q": ["c_attn"], "k": ["c_attn"], "v": ["c_attn"], "o": ["attn.c_proj"], "up": ["c_fc"],
             "down": ["mlp.c_proj"]},
    "gpt_neox": {**_QKV, "o": ["attention.dense"], "up": ["dense_h_to_4h"], "down": ["dense_4h_to_h"]},
    "opt": {"q": ["q_proj"], "k": ["k_proj"], "v": ["v_proj"], "o": ["out_proj"], "up": ["fc1"], "down": ["fc2"]},
    "phi": {"q": ["q_proj"], "k": ["k_proj"], "v": ["v_proj"], "o": ["dense"], "up": ["fc1"], "down": ["fc2"]},
    "phi3": {"q": ["qkv_proj"], "k": ["qkv_proj"], "v": ["qkv_proj"], "o": ["o_proj"], "gate": ["gate_up_proj"],
             "up": ["gate_up_proj"], "down": ["down_proj"]},
    "falcon": {**_QKV, "o": ["self_attention.dense"], "up": ["dense_h_to_4h"], "down": ["dense_4h_to_h"]},
    "bloom": {**_QKV, "o": ["self_attention.dense"], "up": ["dense_h_to_4h"], "down": ["dense_4h_to_h"]},
    "gptj": {"q": ["q_proj"], "k": ["k_proj"], "v": ["v_proj"], "o": ["out_proj"], "up": ["fc_in"], "down": ["fc_out"]},
    "gpt_neo": {"q": ["q_proj"], "k": ["k_proj"], "v": ["v_proj"], "o": ["out_proj"], "up": ["c_fc"],
                "down": ["mlp.c_proj"]},
}
ALL_TARGETS = ("q", "k", "v", "o", "gate", "up", "down")


def load_catalog_config(name: str) -> dict:
    path = Path(name)
    if not path.exists():
        path = CATALOG / (name.replace("/", "--") + ".json")
    if not path.exists():
        raise SystemExit(f"no catalog config for {name!r} at {path}; pass a catalog repo id or a config.json path")
    return json.loads(path.read_text())


def dtypes(torch, precision: str, method: str):
    """(storage dtype of the loaded model, adapter/trainable dtype, compute dtype)."""
    param = torch.bfloat16 if precision == "bf16" else torch.float32
    compute = {"fp32": torch.float32, "fp16-mixed": torch.float16}.get(precision, torch.bfloat16)
    return (param if method == "full" else compute), param, compute


def build_model(torch, cfg: dict, row: dict):
    from transformers import AutoConfig, AutoModelForCausalLM

    base, adapter, compute = dtypes(torch, row["precision"], row["method"])
    kwargs = {k: v for k, v in cfg.items()
              if not k.startswith("_") and k not in ("model_type", "torch_dtype", "dtype", "transformers_version")}
    kwargs["use_cache"] = False
    config = AutoConfig.for_model(cfg["model_type"], **kwargs)
    implementation = "eager" if row["attention"] == "eager" else "sdpa"
    model_class = AutoModelForCausalLM._model_mapping[type(config)]
    if implementation == "sdpa" and not getattr(model_class, "_supports_sdpa", False):
        implementation = "eager"  # what transformers picks for such a model; the trace does the same
    with torch.device(DEVICE):
        model = AutoModelForCausalLM.from_config(config, dtype=base, attn_implementation=implementation)
    if row["method"] == "qlora":
        quantize_nf4(torch, model, compute)
    if row["method"] != "full":
        model = apply_lora(torch, model, cfg["model_type"], row, adapter)
    model.train()
    return model, implementation


def quantize_nf4(torch, model, compute_dtype) -> None:
    """Every Linear/Conv1D except the LM head becomes a bitsandbytes NF4 Linear4bit (double quant)."""
    import bitsandbytes as bnb

    head = model.get_output_embeddings()
    targets = [(parent, name, child) for _, parent in model.named_modules() for name, child in parent.named_children()
               if child is not head and (isinstance(child, torch.nn.Linear) or type(child).__name__ == "Conv1D")]
    for parent, name, child in targets:
        weight = child.weight.data
        if type(child).__name__ == "Conv1D":
            weight = weight.t().contiguous()
        out_f, in_f = weight.shape
        new = bnb.nn.Linear4bit(in_f, out_f, bias=child.bias is not None, compute_dtype=compute_dtype,
                                compress_statistics=True, quant_type="nf4", device="meta")
        new.weight = bnb.nn.Params4bit(weight, requires_grad=False, compress_statistics=True,
                                       quant_type="nf4").cuda()
        if child.bias is not None:
            new.bias = torch.nn.Parameter(child.bias.data, requires_grad=False)
        setattr(parent, name, new)
        del child, weight
    torch.cuda.empty_cache()  # as when loading quantised weights: the 16-bit copies are gone


def apply_lora(torch, model, model_type: str, row: dict, adapter_dtype):
    from peft import LoraConfig, get_peft_model

    targets = ALL_TARGETS if "all-linear" in row["lora_targets"] else tuple(row["lora_targets"].split(","))
    if model_type == "mixtral":
        targets = tuple(t for t in targets if t not in ("gate", "up", "down"))  # experts are not Linear
    table = LORA_MODULES[model_type]
    modules = sorted({m for t in targets for m in table.get(t, [])})
    config = LoraConfig(r=int(row["lora_rank"]), target_modules=modules, lora_dropout=0.0, task_type="CAUSAL_LM",
                        fan_in_fan_out=model_type == "gpt2")
    model = get_peft_model(model, config, autocast_adapter_dtype=False)
    for param in model.parameters():
        if param.requires_grad and param.dtype != adapter_dtype:
            param.data = param.data.to(adapter_dtype)
    return model


def build_optimizer(torch, params, kind: str):
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=1e-5, foreach=True)
    if kind == "adamw-fused":
        return torch.optim.AdamW(params, lr=1e-5, fused=True)
    if kind == "sgd":
        return torch.optim.SGD(params, lr=1e-5, momentum=0.9, foreach=True)
    if kind == "adamw-8bit":
        import bitsandbytes as bnb

        return bnb.optim.AdamW8bit(params, lr=1e-5)
    raise SystemExit(f"unknown optimizer {kind!r}")


def _worker_recompute():
    """frenzy/train/recompute.py loaded by path (it imports torch only): the worker's own checkpointing
    and selective policy, without importing the frenzy package."""
    import importlib.util

    path = CATALOG.parents[2] / "train" / "recompute.py"
    spec = importlib.util.spec_from_file_location("frenzy_worker_recompute", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def configure_recompute(torch, model, row: dict) -> None:
    from torch.utils.checkpoint import checkpoint

    if row["recompute"] in ("full", "selective"):
        _worker_recompute().enable_recompute(model, row["recompute"])
    elif row["recompute"] == "attention" and row["attention"] == "eager":
        # Checkpoint only the attention core, as the trace does (frenzy.memory.trace.patches).
        layers = max((m for m in model.modules() if isinstance(m, torch.nn.ModuleList) and len(m)
                      and ("Layer" in type(m[0]).__name__ or "Block" in type(m[0]).__name__)), key=len)
        modeling = sys.modules[type(layers[0]).__module__]
        if hasattr(modeling, "eager_attention_forward"):
            core = modeling.eager_attention_forward
            modeling.eager_attention_forward = lambda *a, **k: checkpoint(core, *a, use_reentrant=False, **k)
        else:
            for layer in layers:
                attn = next(getattr(layer, n) for n in ("self_attn", "attn", "attention", "self_attention")
                            if hasattr(layer, n))
                name = "_attn" if hasattr(attn, "_attn") else "forward"
                fn = getattr(attn, name)
                setattr(attn, name, lambda *a, _fn=fn, **k: checkpoint(_fn, *a, use_reentrant=False, **k))


def autocast_for(torch, precision: str):
    from contextlib import nullcontext

    if precision == "bf16-mixed":
        return torch.autocast(DEVICE, dtype=torch.bfloat16)
    if precision == "fp16-mixed":
        return torch.autocast(DEVICE, dtype=torch.float16)
    return nullcontext()


# ---- one configuration (child process) -----------------------------------------------------------


def device_used_bytes(torch) -> tuple[int, str]:
    """This process's device memory as NVML reports it, else the device-wide used memory."""
    try:
        import pynvml

        pynvml.nvmlInit()
        index = torch.cuda.current_device()
        uuid = torch.cuda.get_device_properties(index).uuid
        handle = next((pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())
                       if str(uuid) in str(pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i)))),
                      pynvml.nvmlDeviceGetHandleByIndex(index))
        for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
            if proc.pid == os.getpid() and proc.usedGpuMemory:
                return int(proc.usedGpuMemory), "nvml-process"
        return int(pynvml.nvmlDeviceGetMemoryInfo(handle).used), "nvml-device"
    except Exception:  # pynvml missing or not permitted: fall back to the CUDA runtime's view
        free, total = torch.cuda.mem_get_info()
        return int(total - free), "mem_get_info"


def versions(torch) -> dict:
    import importlib.metadata as md

    def version(pkg):
        try:
            return md.version(pkg)
        except md.PackageNotFoundError:
            return ""

    return {"gpu_name": torch.cuda.get_device_name(), "torch_version": torch.__version__,
            "cuda_version": torch.version.cuda or "", "transformers_version": version("transformers"),
            "peft_version": version("peft"), "bitsandbytes_version": version("bitsandbytes"),
            "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}


def run_config(row: dict, timed_steps: int = 1) -> dict:
    import torch

    out = versions(torch)
    cfg = load_catalog_config(row["model"])
    mb, seq, accum = int(row["micro_batch"]), int(row["seq_len"]), int(row["grad_accum"])
    if int(row["tp"]) != 1:
        return {**out, "status": "error", "error": "tp > 1 is not measured by this script"}
    torch.manual_seed(0)
    try:
        model, implementation = build_model(torch, cfg, row)
        out["attn_implementation"] = implementation
        configure_recompute(torch, model, row)
        optimizer = build_optimizer(torch, [p for p in model.parameters() if p.requires_grad], row["optimizer"])
        vocab = model.get_output_embeddings().weight.shape[0]
        ids = torch.randint(0, vocab, (mb, seq), device=DEVICE)
        labels = ids.clone()
        labels[:, : seq // 2] = -100  # a fine-tune's masked prompt: the labels are their own tensor
        torch.cuda.synchronize()

        def train_step():
            for _ in range(accum):
                with autocast_for(torch, row["precision"]):
                    loss = model(input_ids=ids, labels=labels, use_cache=False).loss
                loss.backward()
                del loss
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            torch.cuda.synchronize()

        train_step()  # the loop of frenzy.memory.trace.step.run_steps: step 1, then the measured step 2
        out["step1_max_memory_allocated"] = torch.cuda.max_memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        seconds = [timed(train_step)]
        out.update(memory_stats(torch))  # step 2's peaks, before any timing step
        seconds += [timed(train_step) for _ in range(timed_steps - 1)]
        median = sorted(seconds)[len(seconds) // 2]
        out.update(status="ok", step_seconds=round(median, 4), tokens_per_s=round(mb * seq * accum / median, 1))
    except torch.cuda.OutOfMemoryError as exc:
        out.update(status="oom", error=str(exc).splitlines()[0][:300], **memory_stats(torch))
    return out


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def memory_stats(torch) -> dict:
    used, source = device_used_bytes(torch)
    return {"max_memory_allocated": torch.cuda.max_memory_allocated(),
            "max_memory_reserved": torch.cuda.max_memory_reserved(), "device_used_bytes": used,
            "device_used_source": source}


# ---- driver (parent process) ---------------------------------------------------------------------


def read_matrix(path: str | None) -> list[dict]:
    if path is None:
        return [dict(r) for r in DEFAULT_MATRIX]
    text = Path(path).read_text()
    rows = json.loads(text) if path.endswith(".json") else list(csv.DictReader(text.splitlines()))
    return [{**DEFAULTS, **{k: v for k, v in r.items() if v not in (None, "")}} for r in rows]


def select(rows: list[dict], spec: str) -> list[dict]:
    try:
        if ":" in spec:
            start, _, end = spec.partition(":")
            return rows[int(start or 0):int(end) if end else None]
        return [rows[int(i)] for i in spec.split(",")]
    except (ValueError, IndexError):
        raise SystemExit(f"--rows {spec!r}: give START:END or I,J,K, 0-based indices below {len(rows)}") from None


def run_in_subprocess(row: dict, timeout_s: int, timed_steps: int) -> dict:
    try:
        done = subprocess.run([sys.executable, __file__, "--child", json.dumps(row), "--timed-steps", str(timed_steps)], capture_output=True,
                              text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return {"status": "error", "error": f"timed out after {timeout_s} s"}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
    return {"status": "error", "error": tail[0][:300]}


def main() -> None:
    parser = argparse.ArgumentParser(description="Measure training-step GPU memory per configuration.")
    parser.add_argument("--matrix", help="CSV or JSON list of configurations (default: the built-in matrix)")
    parser.add_argument("--out", default="gpu_memory.csv", help="CSV to write (one row per configuration)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per configuration")
    parser.add_argument("--timed-steps", type=int, default=1,
                        help="steps timed from step 2 on (tokens/s from their median); memory is step 2's")
    parser.add_argument("--rows", default=":", help="part of the matrix (0-based): START:END, or I,J,K")
    parser.add_argument("--print-default-matrix", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.print_default_matrix:
        print(json.dumps(DEFAULT_MATRIX, indent=1))
        return
    if args.child:
        print("RESULT " + json.dumps(run_config(json.loads(args.child), args.timed_steps)), flush=True)
        return
    rows = select(read_matrix(args.matrix), args.rows)
    import torch

    if not torch.cuda.is_available():
        raise SystemExit(f"bench/gpu_memory.py measures GPU memory and needs a CUDA device, but "
                         f"torch.cuda.is_available() is False (torch {torch.__version__}, "
                         f"CUDA build {torch.version.cuda or 'none'}). Run it on a GPU machine.")
    with open(args.out, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CONFIG_COLUMNS + RESULT_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for i, row in enumerate(rows, 1):
            result = run_in_subprocess(row, args.timeout, args.timed_steps)
            writer.writerow({**{c: row.get(c, "") for c in CONFIG_COLUMNS}, **result})
            handle.flush()
            gib = int(result.get("max_memory_allocated") or 0) / 2**30
            print(f"[{i}/{len(rows)}] {row['model']} {row['precision']} {row['method']} {row['optimizer']} "
                  f"rc={row['recompute']} attn={row['attention']} mb={row['micro_batch']} s={row['seq_len']}: "
                  f"{result.get('status')} {gib:.2f} GiB", flush=True)


if __name__ == "__main__":
    main()

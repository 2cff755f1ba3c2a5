"""Run the training loop on N local CPU processes (gloo), as Ray Train would, without Ray."""

from __future__ import annotations

import json
import os
import socket

import torch.multiprocessing as mp

SMALL_LLAMA = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512,
               "max_position_embeddings": 256, "tie_word_embeddings": False}


def write_short_chats(folder) -> str:
    """40 short conversations (every one fits 64 byte tokens) as a chat JSONL file in `folder`."""
    path = folder / "chat.jsonl"
    rows = [{"messages": [{"role": "user", "content": "q" * (1 + i % 5)},
                          {"role": "assistant", "content": "a" * (1 + (i * 7) % 13)}]} for i in range(40)]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return str(path)


def base_config(tmp_path, **over) -> dict:
    cfg = dict(job_id="j-test", attempt=1, model_name="small-llama", family="llama", hf_config=SMALL_LLAMA,
               seq_len=32, global_batch=4, micro_batch=2, grad_accum=2, dp=1, tp=1, steps=3,
               storage_path=str(tmp_path), precision="fp32", checkpoint_every=2,
               gpu_type="A10G-24G", gpu_memory_bytes=10**9, predicted_peak_bytes=10**8)
    cfg.update(over)
    return cfg


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(rank, world, port, config, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    import torch.distributed as dist

    from frenzy.train.worker import train_loop

    dist.init_process_group("gloo", rank=rank, world_size=world)
    reports = []
    try:
        train_loop(config, report=reports.append)
        result = {"reports": reports}
    except Exception as exc:  # surfaced to the test
        import traceback
        result = {"error": f"{type(exc).__name__}: {exc}", "reports": reports, "traceback": traceback.format_exc()}
    finally:
        dist.destroy_process_group()
    with open(f"{out}.{rank}", "w") as f:
        json.dump(result, f)


def run_world(config: dict, world: int, tmp_path) -> list[dict]:
    out = str(tmp_path / "result")
    mp.start_processes(_run, args=(world, _free_port(), config, out), nprocs=world, start_method="spawn")
    results = []
    for rank in range(world):
        with open(f"{out}.{rank}") as f:
            results.append(json.load(f))
    return results


def _run_function(rank, world, port, fn, args, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    import traceback

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        result = fn(rank, *args)
    except Exception as exc:  # surfaced to the test
        result = {"error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"}
    finally:
        dist.destroy_process_group()
    torch.save(result, f"{out}.{rank}")


def run_function(fn, world: int, tmp_path, *args) -> list:
    """Run `fn(rank, *args)` (a module-level function, so spawn can import it) on `world` gloo CPU
    ranks; returns each rank's return value (torch.save-able), or {"error": traceback} where it raised."""
    import torch

    out = str(tmp_path / "function-result")
    mp.start_processes(_run_function, args=(world, _free_port(), fn, args, out), nprocs=world,
                       start_method="spawn")
    return [torch.load(f"{out}.{rank}", weights_only=False) for rank in range(world)]

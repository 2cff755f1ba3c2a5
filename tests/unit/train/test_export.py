"""The artifacts a job hands back load with Hugging Face and give the trained model's outputs:
full fine-tuning gathered from FSDP2 / tensor-parallel shards into sharded safetensors, LoRA
adapters from DDP / FSDP2 / one rank, GPT-2's tied embeddings and Conv1D adapters, and
merge_lora. References come from outside the export code: the trained model's own forward and
torch's full state dict (torch.distributed.checkpoint.state_dict)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from frenzy.core.generic import text_config
from frenzy.train import export
from frenzy.train.config import WorkerConfig
from frenzy.train.export import merge_lora, write_artifacts
from frenzy.train.model import apply_tensor_parallel, build_model, device_mesh, wrap_data_parallel
from frenzy.train.optimization import make_optimizer
from tests.unit.train.dist_helpers import SMALL_LLAMA, base_config, run_function

pytestmark = pytest.mark.slow

SMALL_GPT2 = {"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 512,
              "n_positions": 128, "tie_word_embeddings": True}
IDS = torch.randint(0, 512, (2, 12), generator=torch.Generator().manual_seed(7))
SHARD = 100_000  # bytes: the small Llama (about 0.5 MB in fp32) spreads over several shards
TWO_RANK_LAYOUTS = {
    "full-fsdp": dict(dp=2, zero=3, micro_batch=1, grad_accum=2),
    "full-zero1": dict(dp=2, zero=1, micro_batch=1, grad_accum=2),  # parameters stay gathered after forward
    "full-tp": dict(dp=1, tp=2),
    "lora-fsdp": dict(dp=2, zero=3, micro_batch=1, grad_accum=2, method="lora"),
    "lora-ddp": dict(dp=2, zero=0, micro_batch=1, grad_accum=2, method="lora"),
}


def _config(root: Path, **over) -> WorkerConfig:
    return WorkerConfig.from_json(base_config(root, **over))


def _train(model, cfg: WorkerConfig, seed: int, steps: int = 2) -> None:
    """A few optimizer steps (enough to move LoRA's B away from zero)."""
    optimizer = make_optimizer(model, cfg)
    vocab = text_config(cfg.hf_config)["vocab_size"]
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        ids = torch.randint(0, vocab, (cfg.micro_batch, 16), generator=generator)
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def _logits(model) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=IDS).logits
    # tensor parallelism leaves the logits split on the vocabulary (the loss runs on the shards)
    return (logits.full_tensor() if hasattr(logits, "full_tensor") else logits).float()


def _fresh_base(hf_config: dict, root: Path):
    """The base model a user rebuilds: same config and seed, no adapters."""
    return build_model(_config(root, hf_config=hf_config, method="full"))


def _recording_writers() -> list:
    writers = []

    class Recording(export.ShardWriter):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            writers.append(self)

    export.ShardWriter = Recording
    return writers


def _train_and_export(rank: int, root: str) -> dict:
    """On each rank: every two-rank layout trains, computes its reference, and exports."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    writers = _recording_writers()
    results = {}
    for name, layout in TWO_RANK_LAYOUTS.items():
        cfg = _config(Path(root) / name, **layout)
        mesh = device_mesh(cfg, "cpu")
        model = build_model(cfg)
        if cfg.tp > 1:
            apply_tensor_parallel(model, mesh["tp"], cfg)
        model = wrap_data_parallel(model, cfg, mesh, torch.device("cpu"))
        _train(model, cfg, seed=mesh["dp"].get_local_rank())  # tensor-parallel peers see the same batch
        logits = _logits(model)  # collective under FSDP2 / TP: every rank runs it
        state = None
        if cfg.method == "full":
            state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        writers.clear()
        files = write_artifacts(model, cfg, Path(root) / name / "out", max_shard_bytes=SHARD)
        results[name] = {"files": files, "logits": logits, "state": state,
                         "peak": max((w.peak_pending_bytes for w in writers), default=0)}
    return results


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    root = tmp_path_factory.mktemp("export2")
    results = run_function(_train_and_export, 2, root, str(root))
    for result in results:
        assert "error" not in result, result.get("error")
    return root, results


def _shard_keys(out: Path) -> dict[str, list[str]]:
    """Every safetensors file's keys, and the index's weight map checked to name each once."""
    files = sorted(out.glob("*.safetensors"))
    keys = {}
    for f in files:
        with safe_open(str(f), "pt") as st:
            keys[f.name] = list(st.keys())
    if (out / "model.safetensors.index.json").exists():
        # pairs, not a dict: a key the index lists twice must not collapse into one
        index = dict(json.loads((out / "model.safetensors.index.json").read_text(), object_pairs_hook=list))
        listed = [k for k, _ in index["weight_map"]]
        assert len(listed) == len(set(listed)), "a weight is listed twice"
        assert dict(index["weight_map"]) == {k: f for f, ks in keys.items() for k in ks}
    flat = [k for ks in keys.values() for k in ks]
    assert len(flat) == len(set(flat)), "a weight is written twice"
    return keys


def _load_full(out: Path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(out, local_files_only=True)


@pytest.mark.parametrize("name", ["full-fsdp", "full-zero1", "full-tp"])
def test_full_fine_tuning_streams_shards_that_reload_to_the_trained_model(two_ranks, name):
    root, results = two_ranks
    out, result = root / name / "out", results[0][name]
    assert results[1][name]["files"] == [] and results[1][name]["peak"] == 0  # only rank 0 writes
    assert sorted(p.name for p in out.iterdir()) == result["files"]
    keys = _shard_keys(out)
    assert len(keys) >= 3  # the streaming path flushed several shards
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["dtype"] == "float32"  # not FSDPLlama...
    state = result["state"]  # torch's own full state dict of the trained model
    assert sorted(k for ks in keys.values() for k in ks) == sorted(state)
    for f, ks in keys.items():
        with safe_open(str(out / f), "pt") as st:
            for k in ks:
                assert torch.equal(st.get_tensor(k), state[k]), k
    biggest = max(t.numel() * t.element_size() for t in state.values())
    assert 0 < result["peak"] <= max(SHARD, biggest)  # rank 0 buffered at most one shard
    torch.testing.assert_close(_logits(_load_full(out)), result["logits"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["lora-fsdp", "lora-ddp"])
def test_lora_adapter_from_two_ranks_reloads_onto_a_fresh_base(two_ranks, name, tmp_path):
    from peft import PeftModel

    root, results = two_ranks
    out = root / name / "out"
    assert results[0][name]["files"] == ["adapter_config.json", "adapter_model.safetensors"]
    keys = _shard_keys(out)["adapter_model.safetensors"]
    assert keys and all(k.startswith("base_model.model.") and ".lora_" in k and ".default." not in k for k in keys)
    model = PeftModel.from_pretrained(_fresh_base(SMALL_LLAMA, tmp_path), out)
    torch.testing.assert_close(_logits(model), results[0][name]["logits"], rtol=1e-5, atol=1e-5)


def _one_rank(tmp_path: Path, **over):
    cfg = _config(tmp_path, **over)
    model = build_model(cfg)
    _train(model, cfg, seed=0)
    return cfg, model, _logits(model)


def test_full_fine_tuning_on_one_rank_shards_and_reloads(tmp_path):
    cfg, model, logits = _one_rank(tmp_path)
    files = write_artifacts(model, cfg, tmp_path / "out", max_shard_bytes=SHARD)
    assert "model.safetensors.index.json" in files and "config.json" in files and "generation_config.json" in files
    assert len(_shard_keys(tmp_path / "out")) >= 3
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["dtype"] == "float32"
    torch.testing.assert_close(_logits(_load_full(tmp_path / "out")), logits, rtol=1e-5, atol=1e-5)


def test_bf16_training_saves_bf16_and_a_rerun_replaces_the_old_artifact(tmp_path):
    cfg, model, logits = _one_rank(tmp_path, precision="bf16")
    out = tmp_path / "out"
    write_artifacts(model, cfg, out, max_shard_bytes=SHARD)
    assert write_artifacts(model, cfg, out) == ["config.json", "generation_config.json", "model.safetensors"]
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "generation_config.json", "model.safetensors"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no staging left behind
    assert json.loads((out / "config.json").read_text())["dtype"] == "bfloat16"
    with safe_open(str(out / "model.safetensors"), "pt") as st:
        assert st.get_tensor("lm_head.weight").dtype == torch.bfloat16
    loaded = _load_full(out)
    assert loaded.dtype == torch.bfloat16
    torch.testing.assert_close(_logits(loaded), logits, rtol=0, atol=0)


def test_lora_on_one_rank_reloads_onto_a_fresh_base(tmp_path):
    from peft import PeftModel

    cfg, model, logits = _one_rank(tmp_path, method="lora", lora_targets=("q", "k", "v", "o"))
    write_artifacts(model, cfg, tmp_path / "out")
    saved = json.loads((tmp_path / "out" / "adapter_config.json").read_text())
    assert saved["inference_mode"] and sorted(saved["target_modules"]) == ["k_proj", "o_proj", "q_proj", "v_proj"]
    reloaded = PeftModel.from_pretrained(_fresh_base(SMALL_LLAMA, tmp_path), tmp_path / "out")
    torch.testing.assert_close(_logits(reloaded), logits, rtol=1e-5, atol=1e-5)


def test_gpt2_tied_embeddings_and_conv1d_adapters_round_trip(tmp_path):
    from peft import PeftModel

    cfg, model, logits = _one_rank(tmp_path, hf_config=SMALL_GPT2, model_name="gpt2", family="gpt2")
    write_artifacts(model, cfg, tmp_path / "full", max_shard_bytes=SHARD)
    keys = {k for ks in _shard_keys(tmp_path / "full").values() for k in ks}
    assert "transformer.wte.weight" in keys and "lm_head.weight" not in keys  # the tied copy is not written
    loaded = _load_full(tmp_path / "full")
    assert loaded.lm_head.weight.data_ptr() == loaded.transformer.wte.weight.data_ptr()
    torch.testing.assert_close(_logits(loaded), logits, rtol=1e-5, atol=1e-5)

    cfg, model, logits = _one_rank(tmp_path, hf_config=SMALL_GPT2, model_name="gpt2", family="gpt2", method="lora")
    write_artifacts(model, cfg, tmp_path / "lora")
    assert json.loads((tmp_path / "lora" / "adapter_config.json").read_text())["fan_in_fan_out"]
    reloaded = PeftModel.from_pretrained(_fresh_base(SMALL_GPT2, tmp_path), tmp_path / "lora")
    torch.testing.assert_close(_logits(reloaded), logits, rtol=1e-5, atol=1e-5)


def _base_folder(folder: Path, tokenizer: bool) -> Path:
    """A local base: save_pretrained of a random small Llama, with a word-level tokenizer or none."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(3)
    config = LlamaConfig(**{k: v for k, v in SMALL_LLAMA.items() if k != "model_type"})
    LlamaForCausalLM(config).save_pretrained(folder)
    if tokenizer:
        from tokenizers import Tokenizer, models, pre_tokenizers
        from transformers import PreTrainedTokenizerFast

        vocab = {"[UNK]": 0, **{f"w{i}": i + 1 for i in range(40)}}
        tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(folder)
    return folder


def test_merge_lora_folds_the_adapter_into_a_local_base(tmp_path):
    from peft import AutoPeftModelForCausalLM
    from transformers import AutoTokenizer

    base = _base_folder(tmp_path / "base", tokenizer=True)
    cfg, model, logits = _one_rank(tmp_path, method="lora", local_weights=str(base))
    files = write_artifacts(model, cfg, tmp_path / "adapter")
    assert "tokenizer.json" in files and (tmp_path / "adapter" / "tokenizer.json").exists()
    # the adapter names its local base, so AutoPeftModelForCausalLM finds it on its own
    auto = AutoPeftModelForCausalLM.from_pretrained(tmp_path / "adapter", local_files_only=True)
    torch.testing.assert_close(_logits(auto), logits, rtol=1e-5, atol=1e-5)
    merged_files = merge_lora(tmp_path / "adapter", str(base), tmp_path / "merged", max_shard_bytes=SHARD)
    assert "model.safetensors.index.json" in merged_files and "tokenizer.json" in merged_files
    assert not any(".lora_" in k for ks in _shard_keys(tmp_path / "merged").values() for k in ks)
    torch.testing.assert_close(_logits(_load_full(tmp_path / "merged")), logits, rtol=1e-5, atol=1e-5)
    assert AutoTokenizer.from_pretrained(tmp_path / "merged", local_files_only=True)("w1 w2")["input_ids"] == [2, 3]


def test_merge_lora_refuses_a_base_without_local_weights_and_no_tokenizer_is_skipped(tmp_path):
    base = _base_folder(tmp_path / "base", tokenizer=False)
    cfg, model, _ = _one_rank(tmp_path, method="lora", local_weights=str(base))
    assert write_artifacts(model, cfg, tmp_path / "adapter") == ["adapter_config.json", "adapter_model.safetensors"]
    for bad in ("meta-llama/Llama-3.2-1B", str(tmp_path / "adapter")):
        with pytest.raises(ValueError, match="local folder"):
            merge_lora(tmp_path / "adapter", bad, tmp_path / "merged")
    assert not (tmp_path / "merged").exists()


def test_shard_writer_copies_views_of_one_buffer_and_names_a_single_shard_model_safetensors(tmp_path):
    buffer = torch.arange(12, dtype=torch.float32)
    writer = export.ShardWriter(tmp_path, max_shard_bytes=1000)
    writer.add("a", buffer[:6])
    writer.add("b", buffer[6:])  # same storage: safetensors would refuse the pair
    writer.add("c", buffer.view(3, 4).t())  # not contiguous
    assert writer.close() == ["model.safetensors"]
    with safe_open(str(tmp_path / "model.safetensors"), "pt") as st:
        assert torch.equal(st.get_tensor("b"), buffer[6:]) and torch.equal(st.get_tensor("c"), buffer.view(3, 4).t())


SMALL_TEXT = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=512, pad_token_id=0, max_position_embeddings=256)
MULTIMODAL = {  # the worker trains the text model; transformers maps only the multimodal model_type
    "emu3": {"model_type": "emu3", "text_config": {**SMALL_TEXT, "model_type": "emu3_text_model"}},
    "mllama": {"model_type": "mllama", "text_config": {**SMALL_TEXT, "model_type": "mllama_text_model",
                                                       "cross_attention_layers": [1]}},
}


@pytest.mark.parametrize("model_type", sorted(MULTIMODAL))
def test_a_text_model_of_a_multimodal_config_loads_with_auto_model_for_causal_lm(tmp_path, model_type):
    cfg, model, logits = _one_rank(tmp_path, hf_config=MULTIMODAL[model_type], model_name=model_type,
                                   family=model_type)
    write_artifacts(model, cfg, tmp_path / "out")
    loaded = _load_full(tmp_path / "out")
    assert type(loaded) is type(model)
    torch.testing.assert_close(_logits(loaded), logits, rtol=1e-5, atol=1e-5)

    # an adapter merged into a local base of that kind loads the same way
    hf_config = MULTIMODAL[model_type]
    cfg, model, logits = _one_rank(tmp_path, hf_config=hf_config, model_name=model_type, family=model_type,
                                   method="lora")
    write_artifacts(model, cfg, tmp_path / "lora")
    write_artifacts(_fresh_base(hf_config, tmp_path), _config(tmp_path, hf_config=hf_config, method="full"),
                    tmp_path / "base")
    merge_lora(tmp_path / "lora", str(tmp_path / "base"), tmp_path / "merged")
    torch.testing.assert_close(_logits(_load_full(tmp_path / "merged")), logits, rtol=1e-5, atol=1e-5)

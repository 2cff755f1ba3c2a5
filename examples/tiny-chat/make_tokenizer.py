"""Build examples/tiny-chat: a byte-level BPE tokenizer trained on examples/data/instructions.jsonl
with the `tokenizers` library, saved as tokenizer.json + tokenizer_config.json (ChatML chat
template; <|pad|>, <|im_start|>, <|im_end|> as special tokens, <|im_end|> the end of sequence), and
the matching config.json of a tiny Llama (random weights: the folder ships no weights file).
Deterministic; licence Apache-2.0 like the project.

    python examples/data/make_instructions.py && python examples/tiny-chat/make_tokenizer.py
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = Path(__file__).parent
DATA = HERE.parent / "data" / "instructions.jsonl"
VOCAB = 640
SPECIALS = ["<|pad|>", "<|im_start|>", "<|im_end|>"]  # ids 0, 1, 2
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def texts() -> list[str]:
    """Every message rendered the way training sees it, so role names and newlines get merges too."""
    out = []
    for line in DATA.read_text(encoding="utf-8").splitlines():
        for m in json.loads(line)["messages"]:
            out.append(f"{m['role']}\n{m['content']}\n")
    return out


def build_tokenizer() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts(), trainer=trainer)
    return tok


def model_config(vocab: int, ids: dict[str, int]) -> dict:
    return {"_name_or_path": "frenzy/tiny-chat", "architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "hidden_size": 128, "intermediate_size": 344, "num_hidden_layers": 4, "num_attention_heads": 4,
            "num_key_value_heads": 2, "vocab_size": vocab, "max_position_embeddings": 512,
            "rms_norm_eps": 1e-5, "hidden_act": "silu", "tie_word_embeddings": False, "rope_theta": 10000.0,
            "torch_dtype": "float32", "bos_token_id": None, "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|pad|>"]}


def main() -> None:
    tok = build_tokenizer()
    tok.save(str(HERE / "tokenizer.json"))
    ids = {s: tok.token_to_id(s) for s in SPECIALS}
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": None, "eos_token": "<|im_end|>",
              "pad_token": "<|pad|>", "unk_token": None, "model_max_length": 512, "clean_up_tokenization_spaces": False,
              "additional_special_tokens": ["<|im_start|>"], "chat_template": CHATML}
    (HERE / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    (HERE / "config.json").write_text(json.dumps(model_config(tok.get_vocab_size(), ids), indent=2) + "\n")
    print(f"wrote {HERE} (vocabulary {tok.get_vocab_size()}, specials {ids})")


if __name__ == "__main__":
    main()

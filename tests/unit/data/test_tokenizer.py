import json

import pytest

from frenzy.data import ByteTokenizer, InvalidDataError, load_tokenizer
from frenzy.data.templates import DEFAULT_CHAT_TEMPLATE, render_default

from .conftest import TINY_CHAT


def test_byte_ids_skip_the_special_ids_and_stay_in_vocab():
    tok = ByteTokenizer(32000, eos_token_id=2)  # Llama: eos 2, no pad
    assert (tok.eos_id, tok.pad_id, tok.bos_id) == (2, 2, None)
    assert tok.encode("\x00\x01\x02\x03") == [0, 1, 3, 4]  # byte 2 steps over eos
    every = tok.encode(bytes(range(128)).decode() + "é€")
    assert max(tok.encode("".join(map(chr, range(128))))) == 128 and 2 not in every
    assert tok.decode(tok.encode("héllo\n")) == "héllo\n"


def test_invalid_config_eos_falls_back_to_the_last_id():
    tok = ByteTokenizer(1000, eos_token_id=5000, pad_token_id=[7])
    assert (tok.eos_id, tok.pad_id) == (999, 7)
    ids = [tok._ids[b] for b in range(256)]
    assert len(set(ids)) == 256 and 7 not in ids and 999 not in ids and max(ids) == 256


def test_small_vocab_reuses_ids_and_says_so():
    tok = ByteTokenizer(100, eos_token_id=0)
    ids = tok.encode(bytes(range(256)).decode("latin-1"))
    assert max(ids) < 100 and 0 not in ids and "ambiguous" in tok.describe()


def test_no_model_folder_gives_bytes():
    tok = load_tokenizer(None, {"vocab_size": 50257, "eos_token_id": 50256})
    assert isinstance(tok, ByteTokenizer) and tok.eos_id == 50256 and tok.chat_template is None
    with pytest.raises(InvalidDataError, match="vocab_size"):
        load_tokenizer(None, {})


def test_default_template_matches_its_jinja_twin():
    jinja2 = pytest.importorskip("jinja2")
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "yo"}]
    template = jinja2.Template(DEFAULT_CHAT_TEMPLATE)
    for gen in (False, True):
        assert render_default(messages, gen) == template.render(messages=messages, add_generation_prompt=gen)
    assert render_default(messages[:2], True) == ("<|im_start|>system\nBe brief.<|im_end|>\n"
                                                  "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")


def test_shipped_tokenizer_loads_and_renders_chatml():
    config = json.loads((TINY_CHAT / "config.json").read_text())
    tok = load_tokenizer(str(TINY_CHAT), config)
    assert tok.vocab_size == config["vocab_size"] and 512 <= tok.vocab_size <= 1024
    assert (tok.eos_id, tok.pad_id, tok.bos_id, tok.adds_bos) == (config["eos_token_id"], config["pad_token_id"],
                                                                  None, False)
    assert tok.encode("<|im_start|><|im_end|><|pad|>") == [1, 2, 0]  # special tokens are single ids
    messages = [{"role": "user", "content": "What is 2 + 3?"}]
    text = tok.render_chat(messages, add_generation_prompt=True)
    assert text == "<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n"
    assert tok.decode(tok.encode(text)) == text


def test_shipped_model_folder_is_a_valid_frenzy_model():
    from frenzy.core.hf_config import load_model

    arch = load_model(str(TINY_CHAT))
    assert (arch.hidden_size, arch.num_layers, arch.num_heads, arch.num_kv_heads) == (128, 4, 4, 2)
    assert arch.intermediate_size == 344 and arch.max_position_embeddings == 512 and not arch.tie_word_embeddings
    assert sum(f.stat().st_size for f in TINY_CHAT.iterdir()) < 100_000


def test_tokenizer_larger_than_the_model_is_refused():
    with pytest.raises(InvalidDataError, match="vocab_size is 100"):
        load_tokenizer(str(TINY_CHAT), {"vocab_size": 100})

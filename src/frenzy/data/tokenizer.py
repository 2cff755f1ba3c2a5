"""The tokenizer the data pipeline uses, without importing transformers at module level.

load_tokenizer(model_folder, hf_config):
  * a local Hugging Face model folder with tokenizer files -> that tokenizer (AutoTokenizer,
    local_files_only=True: nothing is downloaded);
  * otherwise (a catalog config, random weights) -> ByteTokenizer.

ByteTokenizer mapping (documented because the ids must stay below the model's vocab_size):
  * eos = the config's eos_token_id when it is an id below vocab_size (the first, if a list), else
    vocab_size - 1; pad = the config's pad_token_id when valid, else eos (padding carries no loss);
  * byte b (0..255) maps to the b-th id of 0, 1, 2, ... that is not eos or pad, so bytes never
    collide with the special ids; e.g. Llama (eos 2, no pad) gives bytes -> 0, 1, 3, 4, ..., 257;
  * a vocabulary too small for 256 byte ids plus the specials (under 258) reuses ids modulo the
    free ids: training still works but decoding is ambiguous; describe() says so;
  * no BOS is added (bos_id is None) and there is no chat template (the default ChatML is used).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from frenzy.core.one_at_a_time import TRANSFORMERS_IMPORT
from frenzy.data.errors import InvalidDataError
from frenzy.data.templates import render_default

BYTES = 256
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


class Tokenizer(Protocol):
    eos_id: int
    pad_id: int
    bos_id: int | None
    adds_bos: bool  # whether the tokenizer normally starts a sequence with bos_id
    vocab_size: int
    chat_template: str | None

    def encode(self, text: str) -> list[int]: ...  # no special tokens added
    def decode(self, ids: Sequence[int]) -> str: ...
    def describe(self) -> str: ...
    def render_chat(self, messages: Sequence[dict], add_generation_prompt: bool) -> str: ...


def _valid_id(value: object, vocab_size: int) -> int | None:
    if isinstance(value, list):
        value = value[0] if value else None
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < vocab_size:
        return value
    return None


class ByteTokenizer:
    """UTF-8 bytes mapped into a model's vocabulary (see the module docstring for the mapping)."""

    bos_id = None
    adds_bos = False
    chat_template = None

    def __init__(self, vocab_size: int, eos_token_id: object = None, pad_token_id: object = None):
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 2:
            raise InvalidDataError(f"vocab_size {vocab_size!r} is not usable for byte tokens; "
                                   "the model config needs an integer vocab_size of at least 2")
        self.vocab_size = vocab_size
        found_eos = _valid_id(eos_token_id, vocab_size)
        self.eos_id = found_eos if found_eos is not None else vocab_size - 1
        found_pad = _valid_id(pad_token_id, vocab_size)
        self.pad_id = found_pad if found_pad is not None else self.eos_id
        free = [i for i in range(min(vocab_size, BYTES + 2)) if i not in (self.eos_id, self.pad_id)]
        self.lossy = len(free) < BYTES
        self._ids = [free[b % len(free)] for b in range(BYTES)] if free else [self.eos_id] * BYTES
        self._bytes = {i: b for b, i in reversed(list(enumerate(self._ids)))}

    def encode(self, text: str) -> list[int]:
        ids = self._ids
        return [ids[b] for b in text.encode("utf-8")]

    def decode(self, ids: Sequence[int]) -> str:
        return bytes(self._bytes[i] for i in ids if i in self._bytes).decode("utf-8", errors="replace")

    def describe(self) -> str:
        note = " (vocabulary under 258 ids: byte ids repeat, decoding is ambiguous)" if self.lossy else ""
        return (f"byte-level UTF-8 into a {self.vocab_size}-id vocabulary, eos {self.eos_id}, "
                f"pad {self.pad_id}{note}")

    def render_chat(self, messages: Sequence[dict], add_generation_prompt: bool) -> str:
        return render_default(messages, add_generation_prompt)


class HFTokenizer:
    """A transformers tokenizer behind the same small interface."""

    def __init__(self, tok, source: str = ""):
        self._tok, self.source = tok, source
        self.vocab_size = len(tok)
        self.chat_template = getattr(tok, "chat_template", None) or None
        eos = tok.eos_token_id
        if eos is None:
            raise InvalidDataError(f"the tokenizer in {source or 'the model folder'} has no eos token; "
                                   "set eos_token in its tokenizer_config.json")
        self.eos_id = int(eos)
        self.pad_id = int(tok.pad_token_id) if tok.pad_token_id is not None else self.eos_id
        self.bos_id = int(tok.bos_token_id) if tok.bos_token_id is not None else None
        # Whether BOS is added is the tokenizer's own post-processing, so ask it rather than guess.
        probe = tok("a", add_special_tokens=True)["input_ids"]
        self.adds_bos = self.bos_id is not None and bool(probe) and probe[0] == self.bos_id

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=False)

    def describe(self) -> str:
        template = "its chat template" if self.chat_template else "the default ChatML template"
        return (f"{type(self._tok).__name__} from {self.source or 'memory'} ({self.vocab_size} ids, "
                f"eos {self.eos_id}, pad {self.pad_id}, bos {self.bos_id}), {template}")

    def render_chat(self, messages: Sequence[dict], add_generation_prompt: bool) -> str:
        if not self.chat_template:
            return render_default(messages, add_generation_prompt)
        return self._tok.apply_chat_template(list(messages), tokenize=False,
                                             add_generation_prompt=add_generation_prompt)


def has_tokenizer_files(folder: str | None) -> bool:
    return bool(folder) and Path(folder).is_dir() and any((Path(folder) / f).is_file() for f in _TOKENIZER_FILES)


def load_tokenizer(model_folder: str | None, hf_config: dict) -> Tokenizer:
    """The local model folder's tokenizer when it has tokenizer files, else bytes into the config's
    vocabulary. A folder whose tokenizer files cannot be loaded is an error, not a silent fallback:
    training with byte ids against a model that expects its own tokens would be quietly useless."""
    if has_tokenizer_files(model_folder):
        with TRANSFORMERS_IMPORT:
            from transformers import AutoTokenizer
        try:
            tok = AutoTokenizer.from_pretrained(model_folder, local_files_only=True)
        except (OSError, ValueError, KeyError) as exc:
            raise InvalidDataError(f"the tokenizer files in {model_folder} could not be loaded ({exc}); "
                                   "fix or remove them (without them byte-level tokens are used)") from exc
        hf = HFTokenizer(tok, source=str(model_folder))
        if hf.vocab_size > int(hf_config.get("vocab_size") or hf.vocab_size):
            raise InvalidDataError(f"the tokenizer in {model_folder} has {hf.vocab_size} ids but the model's "
                                   f"vocab_size is {hf_config['vocab_size']}; use the model's own tokenizer")
        return hf
    return ByteTokenizer(hf_config.get("vocab_size"), hf_config.get("eos_token_id"), hf_config.get("pad_token_id"))

"""A data spec + tokenizer + sequence length -> fixed-shape training and validation arrays and a
report. Pure and deterministic: the control plane runs it to validate a submission (an error is an
HTTP 422 naming the row) and the worker runs it again to train, and both get byte-identical arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from frenzy.data.errors import InvalidDataError
from frenzy.data.files import read_rows
from frenzy.data.formats import IGNORE, encode_chat, encode_prompt_completion, encode_text
from frenzy.data.spec import DataFormat, DataSpec, Overlong
from frenzy.data.tokenizer import Tokenizer

__all__ = ["DataReport", "Examples", "InvalidDataError", "PreparedData", "detect_format", "prepare"]

# The columns that make each format, in detection order (chat first: a chat file may also carry text).
COLUMNS = {DataFormat.CHAT: ("messages",), DataFormat.PROMPT_COMPLETION: ("prompt", "completion"),
           DataFormat.TEXT: ("text",)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Examples:
    """input_ids and labels, int64 [n, seq_len]; labels are -100 where no loss is taken."""
    input_ids: np.ndarray
    labels: np.ndarray

    def __post_init__(self) -> None:
        if self.input_ids.shape != self.labels.shape or self.input_ids.ndim != 2:
            raise ValueError(f"input_ids {self.input_ids.shape} and labels {self.labels.shape} must be the same "
                             "[n, seq_len] shape")
        if self.input_ids.dtype != np.int64 or self.labels.dtype != np.int64:
            raise ValueError("input_ids and labels must be int64")

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def trainable_tokens(self) -> int:
        return int((self.labels != IGNORE).sum())


@dataclass(frozen=True, slots=True, kw_only=True)
class DataReport:
    """Counts for the job log and the API. truncated and dropped count examples over both splits;
    trainable_tokens counts the training examples' labelled positions."""
    format: str
    rows: int
    train_examples: int
    validation_examples: int
    truncated: int
    dropped: int
    trainable_tokens: int
    template: str
    validation_rows: int = 0
    tokenizer: str = ""

    def to_json(self) -> dict:
        return {name: getattr(self, name) for name in self.__slots__}

    def lines(self) -> list[str]:
        return [f"data: {self.format}, {self.rows} rows ({self.validation_rows} for validation)",
                f"data: {self.train_examples} training and {self.validation_examples} validation examples, "
                f"{self.trainable_tokens} trainable tokens",
                f"data: {self.truncated} truncated, {self.dropped} dropped (over-long or empty)",
                f"data: template {self.template}; tokenizer {self.tokenizer}"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedData:
    train: Examples
    validation: Examples
    report: DataReport


@dataclass(slots=True)
class _Counts:
    truncated: int = 0
    dropped: int = 0
    too_long: int = 0  # dropped because over seq_len (for the error's advice)


SHOWN_COLUMNS, SHOWN_NAME_CHARS = 20, 60  # how much of a file's columns an error repeats


def detect_format(columns: list[str], requested: DataFormat, path: str) -> DataFormat:
    """The format a file's columns make (AUTO), or a check that the requested one's are present."""
    candidates = COLUMNS if requested is DataFormat.AUTO else {requested: COLUMNS[requested]}
    for fmt, needed in candidates.items():
        if all(c in columns for c in needed):
            return fmt
    expected = "; ".join(f"{' + '.join(cols)} for {fmt.value}" for fmt, cols in candidates.items())
    found = sorted(columns)
    # a file may have millions of columns: the answer names a few, and how many there are
    shown = ", ".join(repr(c[:SHOWN_NAME_CHARS]) for c in found[:SHOWN_COLUMNS])
    more = f" and {len(found) - SHOWN_COLUMNS:,} more" if len(found) > SHOWN_COLUMNS else ""
    raise InvalidDataError(f"{path}: columns found [{shown}]{more}; expected {expected}. Rename the columns "
                           "or set the data format")


def _columns(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(key for row in rows for key in row))


def split_indices(n: int, fraction: float, seed: int, path: str) -> tuple[list[int], list[int]]:
    """(training, validation) row indices, each in file order: a seeded shuffle picks the validation
    rows; keeping file order afterwards leaves batch order to the trainer."""
    held = int(n * fraction + 0.5)
    if held < 1 or held >= n:
        raise InvalidDataError(f"{path}: a validation fraction of {fraction} of {n} rows leaves "
                               f"{held} validation and {n - held} training rows; both need at least one. "
                               "Change the fraction, add rows, or pass a separate validation file")
    chosen = set(np.random.default_rng(seed).permutation(n)[:held].tolist())
    return [i for i in range(n) if i not in chosen], sorted(chosen)


def _empty(seq_len: int) -> Examples:
    return Examples(input_ids=np.zeros((0, seq_len), np.int64), labels=np.zeros((0, seq_len), np.int64))


def _pack(rows: list[dict], numbers: list[int], tok: Tokenizer, seq_len: int, path: str,
          counts: _Counts) -> Examples:
    """Documents + EOS concatenated and cut into seq_len windows, labels = inputs; a trailing partial
    window is dropped unless it is the only one, which is padded (pad positions carry no loss)."""
    stream: list[int] = []
    for row, number in zip(rows, numbers):
        ids = encode_text(row, tok, path, number)
        counts.dropped += not ids
        stream += ids
    if not stream:
        return _empty(seq_len)
    full = len(stream) // seq_len
    if full == 0:
        pad = seq_len - len(stream)
        ids = np.array([stream + [tok.pad_id] * pad], np.int64)
        return Examples(input_ids=ids, labels=np.array([stream + [IGNORE] * pad], np.int64))
    ids = np.array(stream[:full * seq_len], np.int64).reshape(full, seq_len)
    return Examples(input_ids=ids, labels=ids.copy())


def _fit(ids: list[int], labels: list[int], seq_len: int, overlong: Overlong, counts: _Counts):
    """One example cut or refused per the over-long policy: (ids, labels), or None when dropped."""
    if len(ids) > seq_len:
        if overlong is Overlong.TRUNCATE:
            ids, labels = ids[:seq_len], labels[:seq_len]
        if overlong is Overlong.DROP or all(label == IGNORE for label in labels):
            counts.dropped += 1  # dropped, or truncated to nothing left to learn from
            counts.too_long += 1
            return None
        counts.truncated += 1
    elif all(label == IGNORE for label in labels):
        counts.dropped += 1
        return None
    return ids, labels


def _examples(rows: list[dict], numbers: list[int], fmt: DataFormat, tok: Tokenizer, seq_len: int,
              overlong: Overlong, path: str, counts: _Counts) -> Examples:
    """One right-padded example per row: fixed shapes keep memory as predicted, and no packing means
    no attention across examples."""
    if fmt is DataFormat.TEXT:
        return _pack(rows, numbers, tok, seq_len, path, counts)
    encode = encode_chat if fmt is DataFormat.CHAT else encode_prompt_completion
    ids_out, labels_out = [], []
    for row, number in zip(rows, numbers):
        fitted = _fit(*encode(row, tok, path, number), seq_len, overlong, counts)
        if fitted is None:
            continue
        ids, labels = fitted
        pad = seq_len - len(ids)
        ids_out.append(ids + [tok.pad_id] * pad)
        labels_out.append(labels + [IGNORE] * pad)
    if not ids_out:
        return _empty(seq_len)
    return Examples(input_ids=np.array(ids_out, np.int64), labels=np.array(labels_out, np.int64))


def _check_not_empty(examples: Examples, rows: int, counts: _Counts, path: str, spec: DataSpec, seq_len: int,
                     what: str) -> None:
    if len(examples):
        return
    if counts.too_long:
        cut = ("truncating them left no trained token" if spec.overlong is Overlong.TRUNCATE
               else "overlong is 'drop'")
        advice = (f" {counts.too_long} were longer than seq_len {seq_len} and {cut}: use a longer seq_len"
                  + (" or overlong 'truncate'" if spec.overlong is Overlong.DROP else "") + ".")
    else:
        advice = " Check that the rows hold text to train on (an assistant answer, a completion)."
    raise InvalidDataError(f"{path}: no {what} example is left from {rows} rows ({counts.dropped} dropped).{advice}")


def _template(fmt: DataFormat, tok: Tokenizer) -> str:
    if fmt is not DataFormat.CHAT:
        return "none"
    return "the tokenizer's chat template" if tok.chat_template else "default ChatML"


def prepare(spec: DataSpec, tokenizer: Tokenizer, seq_len: int) -> PreparedData:
    """Read, check, tokenize, mask, split and shape the spec's data for sequences of seq_len."""
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 2:
        raise InvalidDataError(f"seq_len {seq_len!r} must be an integer of at least 2")
    rows = read_rows(spec.path)
    fmt = detect_format(_columns(rows), spec.format, spec.path)
    counts = _Counts()
    numbers = list(range(1, len(rows) + 1))
    if spec.validation_path is not None:
        val_rows = read_rows(spec.validation_path)
        detect_format(_columns(val_rows), fmt, spec.validation_path)  # same format as the training file
        val_path, val_numbers = spec.validation_path, list(range(1, len(val_rows) + 1))
        train_rows, train_numbers = rows, numbers
    elif spec.validation_fraction is not None:
        train_idx, val_idx = split_indices(len(rows), spec.validation_fraction, spec.seed, spec.path)
        train_rows, train_numbers = [rows[i] for i in train_idx], [numbers[i] for i in train_idx]
        val_path, val_rows, val_numbers = spec.path, [rows[i] for i in val_idx], [numbers[i] for i in val_idx]
    else:
        train_rows, train_numbers, val_path, val_rows, val_numbers = rows, numbers, spec.path, [], []
    train = _examples(train_rows, train_numbers, fmt, tokenizer, seq_len, spec.overlong, spec.path, counts)
    _check_not_empty(train, len(train_rows), counts, spec.path, spec, seq_len, "training")
    val_counts = _Counts()
    validation = _examples(val_rows, val_numbers, fmt, tokenizer, seq_len, spec.overlong, val_path, val_counts)
    if val_rows:
        _check_not_empty(validation, len(val_rows), val_counts, val_path, spec, seq_len, "validation")
    report = DataReport(format=fmt.value, rows=len(rows), validation_rows=len(val_rows),
                        train_examples=len(train), validation_examples=len(validation),
                        truncated=counts.truncated + val_counts.truncated,
                        dropped=counts.dropped + val_counts.dropped, trainable_tokens=train.trainable_tokens,
                        template=_template(fmt, tokenizer), tokenizer=tokenizer.describe())
    return PreparedData(train=train, validation=validation, report=report)

"""What a job says about its fine-tuning data: the file, its format, the validation split and how
over-long examples are handled. Stored with the job as JSON, so it round-trips through to_json.
Every refusal is an InvalidDataError (a ValueError), so the API answers it with a 422."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from frenzy.data.errors import InvalidDataError

SUFFIXES = (".jsonl", ".json", ".parquet", ".csv", ".txt")  # .txt: one text document per paragraph
MAX_VALIDATION_FRACTION = 0.5  # more than half held out leaves too little to train on


class DataFormat(Enum):
    AUTO = "auto"
    TEXT = "text"
    PROMPT_COMPLETION = "prompt-completion"
    CHAT = "chat"


class Overlong(Enum):
    TRUNCATE = "truncate"
    DROP = "drop"


def _enum(kind: type[Enum], value: object, field: str) -> Enum:
    if isinstance(value, kind):
        return value
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(m.value for m in kind)
        raise InvalidDataError(f"{field} must be one of {allowed}, not {value!r}") from None


def check_suffix(path: str, field: str) -> None:
    """Refuse a file type the loader cannot read before anything is opened."""
    if Path(path).suffix.lower() not in SUFFIXES:
        raise InvalidDataError(f"{field} {path!r} must be a {', '.join(SUFFIXES)} file; convert it to JSON lines "
                         "with one record per line")


@dataclass(frozen=True, slots=True, kw_only=True)
class DataSpec:
    """path: a local .jsonl/.json/.parquet/.csv/.txt file. validation: a fraction of the rows in (0, 0.5],
    a path to a separate file in one of the same formats, or None. seed: the validation split's shuffle."""
    path: str
    format: DataFormat = DataFormat.AUTO
    validation: float | str | None = None
    overlong: Overlong = Overlong.TRUNCATE
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path.strip():
            raise InvalidDataError("data path must be a non-empty path to a local file")
        check_suffix(self.path, "data path")
        object.__setattr__(self, "format", _enum(DataFormat, self.format, "data format"))
        object.__setattr__(self, "overlong", _enum(Overlong, self.overlong, "overlong"))
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise InvalidDataError(f"data seed must be an integer, not {self.seed!r}")
        self._check_validation()

    def _check_validation(self) -> None:
        value = self.validation
        if value is None:
            return
        if isinstance(value, str):
            if not value.strip():
                raise InvalidDataError("validation must be a fraction in (0, 0.5], a file path, or left out; got ''")
            check_suffix(value, "validation file")
            return
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise InvalidDataError(f"validation must be a fraction in (0, 0.5] or a file path, not {value!r}")
        if not 0 < value <= MAX_VALIDATION_FRACTION:
            raise InvalidDataError(f"validation fraction {value} must be in (0, {MAX_VALIDATION_FRACTION}]; "
                             "hold out e.g. 0.05 of the rows, or pass a separate validation file")
        object.__setattr__(self, "validation", float(value))

    @property
    def validation_fraction(self) -> float | None:
        return self.validation if isinstance(self.validation, float) else None

    @property
    def validation_path(self) -> str | None:
        return self.validation if isinstance(self.validation, str) else None

    def to_json(self) -> dict:
        return {"path": self.path, "format": self.format.value, "validation": self.validation,
                "overlong": self.overlong.value, "seed": self.seed}

    @classmethod
    def from_json(cls, d: dict) -> DataSpec:
        if not isinstance(d, dict) or "path" not in d:
            raise InvalidDataError(f"a data spec must be an object with at least 'path', not {d!r}")
        unknown = set(d) - {"path", "format", "validation", "overlong", "seed"}
        if unknown:
            raise InvalidDataError(f"unknown data spec fields {sorted(unknown)}; "
                             "allowed: path, format, validation, overlong, seed")
        return cls(**d)

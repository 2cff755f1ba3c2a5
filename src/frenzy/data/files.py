"""Reading a local data file into rows (a list of dicts): JSON with Python's own parser, Parquet and
CSV with the `datasets` library, offline.

Only local files are read: the path must exist and be a regular file with a known suffix. Nothing is
downloaded (HF_DATASETS_OFFLINE is set before `datasets` is imported) and the Arrow cache lives in a
temporary folder removed after the read, so the user's ~/.cache is not filled with copies of the data.
Each file is read once; the rows are returned as plain Python values so every later step is
independent of Arrow. JSON is not given to Arrow: its parser recurses without a bound, so one line
nested 200,000 deep overflows the stack and kills the process, where Python's parser raises an error
that names the file; and Arrow refuses a column whose type changes between rows, where the per-row
checks should name the row that differs.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

from frenzy.core.errors import InvalidConfigError
from frenzy.core.safe_read import open_regular, read_descriptor
from frenzy.data.errors import InvalidDataError
from frenzy.data.spec import SUFFIXES

SHOWN_CHARS = 200  # how much of a reader's error message is repeated

_BUILDERS = {".parquet": "parquet", ".csv": "csv"}  # JSON is read by _json_rows


def read_rows(path: str, max_bytes: int | None = None) -> list[dict]:
    """The records of a local .jsonl/.json/.parquet/.csv/.txt file, in file order. The file is checked on
    a descriptor opened without blocking (frenzy.core.safe_read): a FIFO, a device or a file over
    max_bytes (None: no cap) is refused before anything is read."""
    file = Path(path).expanduser()
    suffix = file.suffix.lower()
    if suffix not in SUFFIXES:
        raise InvalidDataError(f"{path}: unsupported file type {suffix or '(none)'}; use one of {', '.join(SUFFIXES)}")
    if file.is_dir():
        raise InvalidDataError(f"{path} is a folder; pass one data file ({', '.join(SUFFIXES)})")
    if not file.exists():
        raise InvalidDataError(f"{path} does not exist; pass the path of a local data file")
    try:
        with open_regular(file, what="data file") as (_fd, size):
            pass
    except InvalidConfigError as exc:
        raise InvalidDataError(str(exc)) from None
    if size == 0:
        raise InvalidDataError(f"{path} is empty; it needs at least one record")
    if max_bytes is not None and size > max_bytes:
        raise InvalidDataError(f"{path} is {size:,} bytes, over the {max_bytes:,}-byte limit on data files here; "
                               "pass a smaller file (or split it)")
    if suffix == ".txt":
        rows = _text_rows(file, max_bytes)
    elif suffix not in _BUILDERS:
        rows = _json_rows(file, max_bytes)
    else:
        try:
            rows = _load(file, _BUILDERS[suffix])
        except Exception as exc:  # noqa: BLE001 - Arrow and datasets raise many types; all mean "unreadable"
            cause = _root_cause(exc)
            text = str(cause).splitlines()[0][:SHOWN_CHARS] if str(cause) else ""
            raise InvalidDataError(f"{path} could not be read as {suffix[1:]} ({type(cause).__name__}: {text}); "
                                   "check the file") from exc
    if not rows:
        raise InvalidDataError(f"{path} holds no records; it needs at least one")
    return rows


def offline() -> None:
    """Switch `datasets` and the Hub client to offline before they are imported (they read it then)."""
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _root_cause(exc: BaseException) -> BaseException:
    """The innermost error: `datasets` wraps the reader's own ("An error occurred while generating")."""
    seen = set()
    while (exc.__cause__ or exc.__context__) is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return exc


def _load(file: Path, builder: str) -> list[dict]:
    offline()
    import datasets

    # A malformed line is reported by our own reader; datasets' warnings and bars would only add noise
    # to the server's and worker's logs, so both are quiet for this read and restored afterwards.
    bars_were_off, verbosity = datasets.are_progress_bars_disabled(), datasets.logging.get_verbosity()
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity(datasets.logging.CRITICAL)
    try:
        with tempfile.TemporaryDirectory(prefix="frenzy-data-") as cache:
            ds = datasets.load_dataset(builder, data_files=str(file), split="train", cache_dir=cache,
                                       keep_in_memory=True)
            return ds.to_list()
    finally:
        datasets.logging.set_verbosity(verbosity)
        if not bars_were_off:
            datasets.enable_progress_bars()


def _text(file: Path, max_bytes: int | None) -> str:
    """The file's UTF-8 text, read through a descriptor checked as read_rows checks it."""
    try:
        with open_regular(file, what="data file") as (fd, size):
            raw = read_descriptor(fd, max_bytes=max_bytes if max_bytes is not None else size, what=str(file))
    except InvalidConfigError as exc:
        raise InvalidDataError(str(exc)) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidDataError(f"{file} is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from None


def _text_rows(file: Path, max_bytes: int | None) -> list[dict]:
    """Plain text: one {"text": ...} document per paragraph (the lines up to a blank line), as a corpus
    of documents is usually written; the text format packs documents into seq_len windows with an
    end-of-sequence token between them (frenzy.data.prepare)."""
    paragraphs = re.split(r"\n[ \t\r\f\v]*\n", _text(file, max_bytes).replace("\r\n", "\n"))
    return [{"text": paragraph.strip("\n")} for paragraph in paragraphs if paragraph.strip()]


def _json_rows(file: Path, max_bytes: int | None) -> list[dict]:
    """A JSON array of objects, or one JSON value per line; the error names the bad line."""
    text = _text(file, max_bytes)
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidDataError(f"{file}: not valid JSON at line {exc.lineno} ({exc.msg}); fix the file") from exc
        except RecursionError:
            raise _too_deep(file, "its array") from None
        rows = value
    else:
        rows = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InvalidDataError(f"{file}: line {number} is not valid JSON ({exc.msg}); "
                                       "each line must hold one JSON object") from exc
            except RecursionError:
                raise _too_deep(file, f"line {number}") from None
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            raise InvalidDataError(f"{file}: row {number} is {type(row).__name__}, not an object; "
                                   "each record must be a JSON object such as {\"text\": ...}")
    return rows


def _too_deep(file: Path, where: str) -> InvalidDataError:
    return InvalidDataError(f"{file}: {where} nests lists or objects deeper than a JSON parser follows; a record "
                            "is an object of text fields (e.g. {\"text\": ...} or {\"messages\": [...]}): flatten it")

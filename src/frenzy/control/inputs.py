"""What files a request may make the server read: the operator's data roots, nothing else.

A job's `model`, `dataset` and `validation` may name catalog entries, the server's Hugging Face
cache (by repo id), inline configs, or regular files and folders under the roots the operator
configured (`frenzy serve --data-root DIR`, or FRENZY_DATA_ROOTS, os.pathsep-separated). Nothing
else: with no roots, no path is accepted at all.

Paths are resolved (symlinks included) before the containment check, and the request goes on with
the resolved path, so every later read (data check, planning, re-plans, workers) reads what was
checked. A path that is missing and a path outside the roots get the same answer, so the API never
says whether a file outside the roots exists. Inside the roots, files are opened without blocking
and must be regular files under a size cap (frenzy.core.safe_read).

Only the server restricts: `frenzy memory` / `frenzy plan` run as the user and read any path given.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from frenzy.control.data_process import CheckLimits
from frenzy.control.request import DATA_SUFFIXES, SYNTHETIC, JobRequest
from frenzy.core.errors import InvalidConfigError
from frenzy.core.hf_cache import MAX_CONFIG_BYTES
from frenzy.core.safe_read import open_regular

ROOTS_ENV = "FRENZY_DATA_ROOTS"
DEFAULT_MAX_DATA_BYTES = 1 << 30  # 1 GiB: the server reads and tokenises the whole file at submission
MAX_FOLDER_ENTRIES = 10_000  # a model folder holds tens of files; more is not a model folder
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".h5", ".msgpack", ".ckpt")  # not read here
SHOWN_CHARS = 200  # how much of a refused value an error message repeats
MAX_NAME_CHARS = 200  # Hub repo ids are at most 96 + 1 + 96 characters


class InputRefusedError(InvalidConfigError):
    """A path the server will not read (missing, outside the data roots, or unusable)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InputPolicy:
    """roots: folders whose files and sub-folders requests may name (resolved at construction);
    max_data_bytes: the largest data file (training or validation) the server reads; check_limits: the memory
    and time a submission's data check may take (frenzy.control.data_process)."""

    roots: tuple[Path, ...] = ()
    max_data_bytes: int = DEFAULT_MAX_DATA_BYTES
    check_limits: CheckLimits = CheckLimits()

    def __post_init__(self):
        resolved = []
        for root in self.roots:
            real = Path(os.path.realpath(Path(root).expanduser()))
            if not real.is_dir():
                raise InvalidConfigError(f"data root {root} is not an existing folder; create it or drop it from "
                                         f"--data-root / {ROOTS_ENV}")
            resolved.append(real)
        object.__setattr__(self, "roots", tuple(dict.fromkeys(resolved)))
        if isinstance(self.max_data_bytes, bool) or not isinstance(self.max_data_bytes, int) \
                or self.max_data_bytes < 1:
            raise InvalidConfigError(f"max_data_bytes must be a positive integer, got {self.max_data_bytes!r}")

    @classmethod
    def from_settings(cls, roots: Iterable[str | Path] = (), max_data_bytes: int | None = None,
                      env: Mapping[str, str] | None = None, check_limits: CheckLimits | None = None) -> InputPolicy:
        """The roots given plus those in FRENZY_DATA_ROOTS (os.pathsep-separated)."""
        env = os.environ if env is None else env
        extra = [p for p in env.get(ROOTS_ENV, "").split(os.pathsep) if p.strip()]
        return cls(roots=tuple(Path(r) for r in [*roots, *extra]),
                   max_data_bytes=DEFAULT_MAX_DATA_BYTES if max_data_bytes is None else max_data_bytes,
                   check_limits=check_limits or CheckLimits())

    def describe_roots(self) -> str:
        return ", ".join(str(r) for r in self.roots) or "none configured"

    # ---- the check ---------------------------------------------------------------------------

    def check(self, request: JobRequest) -> JobRequest:
        """The request with its paths resolved inside the roots; raises InputRefusedError otherwise."""
        changes: dict[str, str] = {}
        if request.model is not None:
            changes["model"] = self._model(request.model)
        if request.dataset != SYNTHETIC:
            changes["dataset"] = self._data_file(request.dataset, "dataset")
        if isinstance(request.validation, str):
            changes["validation"] = self._data_file(request.validation, "validation")
        changed = {k: v for k, v in changes.items() if getattr(request, k) != v}
        return replace(request, **changed) if changed else request

    def _inside(self, value: str) -> Path | None:
        """The real path of value when it exists under a root; None when it is missing, outside every
        root or unresolvable (one answer for all, so nothing is learnt about other paths)."""
        if not self.roots:
            return None
        try:
            real = Path(os.path.realpath(Path(value).expanduser()))
            if not any(real.is_relative_to(root) for root in self.roots):
                return None
            return real if os.path.lexists(real) else None
        except (OSError, ValueError, RuntimeError):  # a NUL byte, a name too long, a symlink loop
            return None

    def _refuse(self, what: str, value: str, accepted: str) -> InputRefusedError:
        shown = value if len(value) <= SHOWN_CHARS else value[:SHOWN_CHARS] + "..."
        return InputRefusedError(
            f"{what} {shown!r} is not {accepted} under the server's data roots ({self.describe_roots()}); "
            f"put the file under a data root (the operator adds roots with `frenzy serve --data-root DIR` or "
            f"{ROOTS_ENV})")

    def _data_file(self, value: str, what: str) -> str:
        accepted = f"an existing local {' / '.join(DATA_SUFFIXES)} file"
        real = self._inside(value)
        if real is None:
            raise self._refuse(what, value, accepted)
        if real.suffix.lower() not in DATA_SUFFIXES:
            raise InputRefusedError(f"{what} {value!r} resolves to {real.name}, not a {' / '.join(DATA_SUFFIXES)} "
                                    "file; link or name the data file itself")
        with open_regular(real, what=what) as (_fd, size):
            if size > self.max_data_bytes:
                raise InputRefusedError(f"{what} {value!r} is {size:,} bytes, over this server's "
                                        f"{self.max_data_bytes:,}-byte limit on data files; pass a smaller file "
                                        "or ask the operator to raise --max-data-bytes")
        return str(real)

    def _model(self, value: str) -> str:
        real = self._inside(value)
        if real is None:
            if _looks_like_path(value):
                # a path must be under a root like any other path; whatever else is a name, looked up
                # as one (JobRequest.config_and_name) even where a file of that name exists
                raise self._refuse("model", value, "a catalog model, a model in the server's Hugging Face cache, "
                                                   "or a config.json / model folder")
            if len(value) > MAX_NAME_CHARS:  # no model is named so; and suggesting names for it is slow
                raise self._refuse("model", value, "a catalog model, a model in the server's Hugging Face "
                                                   "cache, or a config.json / model folder")
            return value  # a name: the catalog or the Hugging Face cache answers (with suggestions)
        if real.is_dir():
            self._check_folder(real, value)
            config = Path(os.path.realpath(real / "config.json"))
            if not any(config.is_relative_to(r) for r in self.roots) or not os.path.lexists(config):
                raise InputRefusedError(f"model folder {value!r} has no config.json under the data roots; "
                                        "a model folder needs its Hugging Face config.json")
        else:
            config = real
        with open_regular(config, what="model config") as (_fd, size):
            if size > MAX_CONFIG_BYTES:
                raise InputRefusedError(f"model config {value!r} is {size:,} bytes, over the {MAX_CONFIG_BYTES:,} "
                                        "a config.json can be; pass the model's config.json")
        return str(real)

    def _check_folder(self, folder: Path, value: str) -> None:
        """A model folder's files are read too (tokenizer files by transformers): each must be a regular
        file (or folder) under the roots, and all but weights within the data cap."""
        with os.scandir(folder) as entries:
            for count, entry in enumerate(entries, start=1):
                if count > MAX_FOLDER_ENTRIES:
                    raise InputRefusedError(f"model folder {value!r} holds over {MAX_FOLDER_ENTRIES:,} entries; "
                                            "pass a folder with the model's own files only")
                real = Path(os.path.realpath(entry.path))
                if not any(real.is_relative_to(root) for root in self.roots):
                    raise InputRefusedError(f"model folder {value!r} holds {entry.name!r}, a link to outside the "
                                            "data roots; copy the file into the folder instead")
                if real.is_dir() or real.suffix.lower() in WEIGHT_SUFFIXES and real.is_file():
                    continue
                with open_regular(real, what=f"{entry.name!r} in model folder {value!r}") as (_fd, size):
                    if size > self.max_data_bytes:
                        raise InputRefusedError(f"{entry.name!r} in model folder {value!r} is {size:,} bytes, over "
                                                f"the {self.max_data_bytes:,}-byte limit on files read here")


def _looks_like_path(value: str) -> bool:
    """Not a catalog name or a Hub repo id (`org/name`): load_config would take it for a path."""
    return (value.startswith(("/", "~", ".")) or value.endswith(".json") or "\\" in value or "\0" in value
            or value.count("/") > 1 or os.sep != "/" and os.sep in value)


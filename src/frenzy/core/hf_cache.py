"""Configs of models already in the local Hugging Face cache, found offline by repo id.

A user who has run `huggingface-cli download org/name` (or loaded the model once) has its
config.json on disk; predicting its memory should need neither the network nor a copy into the
catalog. The cache layout is read with plain file I/O: importing huggingface_hub would pull in an
HTTP stack that `frenzy memory` and `frenzy plan` do not need, and the layout is stable:

    <cache>/models--<org>--<name>/refs/main                     the revision `main` pointed to
    <cache>/models--<org>--<name>/snapshots/<revision>/config.json
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from frenzy.core.errors import InvalidConfigError
from frenzy.core.safe_read import read_regular

# Real config.json files are a few KiB (Phi's longrope lists make the largest ~10 KiB); anything near
# a MiB is a mislabelled file, and reading it whole would only delay the error.
MAX_CONFIG_BYTES = 1 << 20
_MAX_REF_BYTES = 256  # refs/main holds one 40-hex commit hash


def hub_cache_dir() -> Path:
    """Where huggingface_hub keeps downloads, resolved the way it does: $HF_HUB_CACHE (or its older
    name $HUGGINGFACE_HUB_CACHE), else $HF_HOME/hub, else ~/.cache/huggingface/hub."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.environ[var]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    return Path("~/.cache/huggingface/hub").expanduser()


def _repo_dir(repo_id: str) -> Path | None:
    cache = hub_cache_dir()
    folder = "models--" + repo_id.replace("/", "--")
    if (cache / folder).is_dir():
        return cache / folder
    # The Hub treats repo ids case-insensitively, so a user may type another case than was downloaded.
    if cache.is_dir():
        for entry in cache.iterdir():
            if entry.name.lower() == folder.lower() and entry.is_dir():
                return entry
    return None


def cached_config_path(repo_id: str) -> Path | None:
    """The cached config.json of `repo_id` (`org/name`), or None when it was never downloaded."""
    if repo_id.count("/") != 1 or any(part in ("", ".", "..") for part in repo_id.split("/")):
        return None
    repo_dir = _repo_dir(repo_id)
    if repo_dir is None:
        return None
    snapshots = repo_dir / "snapshots"
    ref = repo_dir / "refs" / "main"
    if ref.is_file():
        try:
            revision = read_regular(ref, max_bytes=_MAX_REF_BYTES, what="cache ref").decode("ascii").strip()
        except (InvalidConfigError, UnicodeDecodeError):
            revision = ""  # not a commit hash: fall back to the newest snapshot below
        if revision and "/" not in revision and revision not in (".", ".."):
            path = snapshots / revision / "config.json"
            if path.is_file():
                return path
    # Downloaded at a pinned revision (no refs/main), or main moved on without a config: the newest
    # snapshot that has one is what the user last fetched.
    found = [p for p in snapshots.glob("*/config.json") if p.is_file()] if snapshots.is_dir() else []
    return max(found, key=lambda p: p.stat().st_mtime, default=None)


def read_cached_config(repo_id: str) -> dict | None:
    """The parsed cached config.json of `repo_id`, or None when the cache does not hold it."""
    path = cached_config_path(repo_id)
    if path is None:
        return None
    try:
        raw = read_regular(path, max_bytes=MAX_CONFIG_BYTES, what="config.json")
    except InvalidConfigError as exc:  # over the limit, or not a regular file: not a model config
        raise InvalidConfigError(f"{exc}. Delete it from the Hugging Face cache and download {repo_id} again, "
                                 "or pass a config.json path") from None
    try:
        cfg = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidConfigError(f"cached {path} is not valid JSON ({exc}); download {repo_id} again") from exc
    if not isinstance(cfg, dict):
        raise InvalidConfigError(f"cached {path} does not hold a JSON object; download {repo_id} again")
    return cfg


WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin")


def local_model_folder(model: str | None) -> Path | None:
    """The local folder a job's `model` names (config, maybe tokenizer and weights), or None for a
    catalog name, a config file or an inline config."""
    if not model:
        return None
    path = Path(model).expanduser()
    return path if path.is_dir() else None


def has_local_weights(folder: Path | None) -> bool:
    """Whether a model folder carries weights (safetensors or PyTorch bins); without them the model
    trains from a seeded random initialisation of its config."""
    return folder is not None and any(next(folder.glob(p), None) for p in WEIGHT_PATTERNS)

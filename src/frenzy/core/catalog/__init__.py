"""Bundled catalogs (GPU types, model configs) and the one function that canonicalises names."""

from __future__ import annotations

import json
import os
from functools import cache
from importlib import resources
from pathlib import Path

from frenzy.core.errors import UnknownNameError
from frenzy.core.gpu import GpuType
from frenzy.core.gpu_catalog import load_gpu_types
from frenzy.core.model_names import architecture_key, variant_table
from frenzy.core.names import closest_names

_HERE = resources.files(__name__)


def _key(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def canonical_name(kind: str, name: str, table: dict[str, str], listed_by: str | None = None) -> str:
    """Map a user-typed name to its canonical name using `table` (normalised alias -> canonical).

    Raises UnknownNameError with the closest canonical names when nothing matches.
    """
    canonical = table.get(_key(name))
    if canonical is not None:
        return canonical
    suggestions = list(dict.fromkeys(table[c] for c in closest_names(_key(name), list(table))))[:4]
    raise UnknownNameError(kind, name, suggestions, list(dict.fromkeys(table.values())), listed_by)


# ---- GPU types ---------------------------------------------------------------------------


GPU_CATALOG_ENV = "FRENZY_GPU_CATALOG"
_user_gpu_catalog: str | None = None  # the --gpu-catalog flag; wins over GPU_CATALOG_ENV


def use_gpu_catalog(path: str | os.PathLike | None) -> None:
    """Merge the user's GPU catalog file at `path` into the bundled one (None: FRENZY_GPU_CATALOG, if set).

    Call it before any GPU lookup: caches keyed by GPU type name elsewhere (plan choices) are not
    cleared, which is why the CLI calls it first thing.
    """
    global _user_gpu_catalog
    _user_gpu_catalog = None if path is None else str(path)
    gpu_types.cache_clear()
    _gpu_aliases.cache_clear()


def user_gpu_catalog() -> str | None:
    """The user's GPU catalog file in effect, or None for the bundled catalog alone."""
    return _user_gpu_catalog or os.environ.get(GPU_CATALOG_ENV) or None


@cache
def gpu_types() -> dict[str, GpuType]:
    """Canonical name -> GpuType; GpuCatalogError (naming every bad row) for an unusable user file."""
    return load_gpu_types((_HERE / "gpus.yaml").read_text(), user_gpu_catalog())


@cache
def _gpu_aliases() -> dict[str, str]:
    table = {}
    for gpu in gpu_types().values():
        for alias in (gpu.name, *gpu.aliases):
            table[_key(alias)] = gpu.name
    return table


def gpu_type(name: str) -> GpuType:
    return gpu_types()[canonical_name("GPU type", name, _gpu_aliases(), "frenzy gpus")]


def catalog_gpu_name(name: str) -> str:
    """The catalog name `name` spells (case, '_' and spaces aside), aliases not accepted: where a name
    says which part a cluster holds or a job asks for, 'a100' (four parts) must not pick one silently.
    UnknownNameError suggests the closest catalog names."""
    return canonical_name("GPU type", name, {_key(n): n for n in gpu_types()}, "frenzy gpus")


# ---- model configs -----------------------------------------------------------------------


def _model_file_name(repo_id: str) -> str:
    return repo_id.replace("/", "--") + ".json"


@cache
def _model_files() -> dict[str, Path]:
    """Canonical repo id -> bundled config.json path."""
    files = {}
    for entry in (_HERE / "models").iterdir():
        if entry.name.endswith(".json"):
            files[entry.name[: -len(".json")].replace("--", "/")] = Path(str(entry))
    return files


def _short_aliases(repo_id: str) -> set[str]:
    """`meta-llama/Llama-2-7b-hf` answers to `llama-2-7b-hf` and `llama-2-7b`."""
    short = repo_id.split("/", 1)[-1]
    aliases = {repo_id, short}
    for suffix in ("-hf", "-v0.1"):
        if short.lower().endswith(suffix):
            aliases.add(short[: -len(suffix)])
    return aliases


@cache
def _model_aliases() -> dict[str, str]:
    table: dict[str, str] = {}
    for repo_id in sorted(_model_files()):
        for alias in _short_aliases(repo_id):
            table.setdefault(_key(alias), repo_id)
    return table


def model_names() -> list[str]:
    return sorted(_model_files())


@cache
def _model_variants() -> dict[str, str]:
    return variant_table(_model_aliases())


def canonical_model_name(name: str, *, variants: bool = True) -> str:
    """The catalog repo id for `name`. With `variants`, a name the catalog does not hold that is a
    post-training variant of one it does (`Qwen/Qwen2.5-7B-Instruct`, `gemma-3-4b-it`) answers to
    that base model (frenzy.core.model_names); unknown names get "did you mean" suggestions."""
    table = _model_aliases()
    if variants and _key(name) not in table:
        base = _model_variants().get(architecture_key(_key(name)))
        if base is not None:
            return base
    return canonical_name("model", name, table, "frenzy models")


def model_config(name: str) -> dict:
    """The bundled HF config.json of a catalog model, by repo id or short alias."""
    repo_id = canonical_model_name(name)
    return json.loads(_model_files()[repo_id].read_text())

"""GPU catalog files: the bundled gpus.yaml and a user's file (--gpu-catalog / FRENZY_GPU_CATALOG).

Both use one schema, a `gpus:` list of rows, checked here by a pydantic model of one row: a catalog
is a file format, the boundary where pydantic belongs. A user row whose name or an alias matches a
bundled type overrides it field by field (omitted fields, and omitted peak_flops formats, keep the
bundled values; aliases are added, so the NVML name a live node reports still maps); any other
user row adds a type and must give every field. Every bad row is reported in one error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from frenzy.core.errors import GpuCatalogError
from frenzy.core.gpu import GpuType
from frenzy.core.names import YamlName

FLOP_FORMATS = ("bf16", "fp16", "tf32", "fp32")


class _PeakFlops(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # 0 means "the GPU lacks this format" (bf16, tf32 before Ampere); fp16 and fp32 every GPU has.
    bf16: Optional[float] = Field(None, ge=0, allow_inf_nan=False)
    fp16: Optional[float] = Field(None, gt=0, allow_inf_nan=False)
    tf32: Optional[float] = Field(None, ge=0, allow_inf_nan=False)
    fp32: Optional[float] = Field(None, gt=0, allow_inf_nan=False)


class GpuRow(BaseModel):
    """One catalog row as written. Every field but `name` may be omitted here: whether the row may omit
    it depends on whether it overrides a bundled type, which only the merge knows."""

    model_config = ConfigDict(extra="forbid")
    name: YamlName = Field(min_length=1)
    aliases: list[YamlName] = []
    memory_bytes: Optional[int] = Field(None, gt=0)
    peak_flops: Optional[_PeakFlops] = None
    hbm_bandwidth_bytes_s: Optional[float] = Field(None, gt=0, allow_inf_nan=False)
    intra_node_link: Optional[Literal["nvlink", "pcie", "xgmi"]] = None
    intra_node_bandwidth_bytes_s: Optional[float] = Field(None, gt=0, allow_inf_nan=False)
    gpus_per_node: Optional[int] = Field(None, ge=1, le=64)
    supports_bf16: Optional[bool] = None
    price_per_gpu_hour_usd: Optional[float] = Field(None, ge=0, allow_inf_nan=False)
    source: Optional[str] = None
    note: Optional[str] = None


REQUIRED = ("memory_bytes", "peak_flops", "hbm_bandwidth_bytes_s", "intra_node_link",
            "intra_node_bandwidth_bytes_s", "gpus_per_node", "supports_bf16", "price_per_gpu_hour_usd")


def _key(name: str) -> str:
    # Same normalisation as catalog._key (kept here so this module does not import the catalog package).
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def _message(error: dict) -> str:
    """A pydantic error as 'field: what is wrong', in the catalog's words rather than pydantic's."""
    where = ".".join(str(p) for p in error["loc"])
    ctx, kind = error.get("ctx") or {}, error["type"]
    bounds = {"greater_than": "> {gt:g}", "greater_than_equal": ">= {ge:g}", "less_than_equal": "<= {le:g}",
              "less_than": "< {lt:g}"}
    if kind in bounds:
        text = "must be " + bounds[kind].format(**ctx)
    elif kind == "finite_number":
        text = "must be a finite number"
    elif kind == "missing":
        text = "missing"
    elif kind == "extra_forbidden":
        text = f"unknown field (known: {', '.join(GpuRow.model_fields)})"
    elif kind == "literal_error":
        text = f"must be one of {ctx.get('expected', '')}".replace("'", "")
    else:
        text = error["msg"].lower()
    return f"{where}: {text}"


def _describe(number: int, raw: object) -> str:
    name = raw.get("name") if isinstance(raw, dict) else None
    return f"row {number}" + (f" (name '{name}')" if name else "")


def parse_rows(text: str, origin: str) -> tuple[list[tuple[int, GpuRow]], list[tuple[int, str]]]:
    """(row number, row) for each valid row of one catalog file, and (row number, problem) for the rest.
    GpuCatalogError when the file as a whole is unreadable."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise GpuCatalogError(f"gpu catalog {origin}: not valid YAML ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("gpus"), list):
        raise GpuCatalogError(f"gpu catalog {origin}: expected a mapping with a `gpus:` list of rows "
                              "(see the bundled gpus.yaml for the schema)")
    rows, problems = [], []
    for number, raw in enumerate(data["gpus"], start=1):
        try:
            rows.append((number, GpuRow.model_validate(raw)))
        except ValidationError as exc:
            problems.append((number, f"{_describe(number, raw)}: " + "; ".join(_message(e) for e in exc.errors())))
    return rows, problems


def _raise_if(problems: list[tuple[int, str]], origin: str) -> None:
    if problems:
        raise GpuCatalogError(f"gpu catalog {origin}: " + "; ".join(text for _, text in sorted(problems)))


def _as_dict(row: GpuRow) -> dict:
    values = row.model_dump(exclude_none=True)
    if "peak_flops" in values:
        values["peak_flops"] = {k: v for k, v in values["peak_flops"].items() if v is not None}
    return values


def merge(bundled: list[GpuRow], user: list[tuple[int, GpuRow]], origin: str,
          problems: list[tuple[int, str]] = ()) -> list[dict]:
    """Bundled rows with the user's rows applied (overrides in place, additions at the end);
    GpuCatalogError listing `problems` (the rows that did not parse) and every row that cannot merge."""
    merged = [_as_dict(r) for r in bundled]
    owner = {_key(a): i for i, row in enumerate(merged) for a in (row["name"], *row.get("aliases", ()))}
    overridden: dict[int, int] = {}
    problems = list(problems)
    for number, row in user:
        values = _as_dict(row)
        hits = {owner[_key(a)] for a in (row.name, *row.aliases) if _key(a) in owner}
        if len(hits) > 1:
            names = ", ".join(sorted(merged[i]["name"] for i in hits))
            problems.append((number, f"row {number} (name '{row.name}'): its name and aliases match several "
                                     f"bundled types ({names}); an override names one type"))
            continue
        if hits:
            index = hits.pop()
            if index in overridden:
                problems.append((number, f"row {number} (name '{row.name}'): row {overridden[index]} already "
                                         f"overrides {merged[index]['name']}; merge the two rows"))
                continue
            overridden[index] = number
            merged[index] = _override(merged[index], values)
            continue
        missing = [f for f in REQUIRED if f not in values]
        missing += [f"peak_flops.{f}" for f in FLOP_FORMATS if "peak_flops" in values and f not in values["peak_flops"]]
        if missing:
            problems.append((number, f"row {number} (name '{row.name}'): a new GPU type must give every field, "
                                     f"missing {', '.join(missing)} (only a row that overrides a bundled type "
                                     "may omit fields)"))
            continue
        merged.append(values)
    _raise_if(problems, origin)
    _check_unique_aliases(merged, origin)
    return merged


def _override(base: dict, values: dict) -> dict:
    out = dict(base, **{k: v for k, v in values.items() if k not in ("name", "aliases", "peak_flops")})
    out["peak_flops"] = dict(base["peak_flops"], **values.get("peak_flops", {}))
    # The canonical name stays the bundled one: plans, node labels and stored jobs use it.
    extra = [a for a in (values["name"], *values.get("aliases", ())) if _key(a) != _key(base["name"])]
    out["aliases"] = list(dict.fromkeys([*base.get("aliases", ()), *extra]))
    return out


def _check_unique_aliases(rows: list[dict], origin: str) -> None:
    seen: dict[str, int] = {}
    problems = []
    for index, row in enumerate(rows):
        for alias in dict.fromkeys(_key(a) for a in (row["name"], *row.get("aliases", ()))):
            if alias in seen:
                problems.append((index, f"'{alias}' names both {rows[seen[alias]]['name']} and {row['name']}; "
                                        "give each name and alias to one type"))
            seen.setdefault(alias, index)
    _raise_if(problems, origin)


def load_gpu_types(bundled_text: str, user_file: str | None) -> dict[str, GpuType]:
    """Canonical name -> GpuType for the bundled catalog merged with `user_file` (None: bundled only)."""
    bundled, problems = parse_rows(bundled_text, "gpus.yaml (bundled)")
    _raise_if(problems, "gpus.yaml (bundled)")
    user: list[tuple[int, GpuRow]] = []
    origin = "gpus.yaml (bundled)"
    if user_file:
        path = Path(user_file).expanduser()
        origin = str(path)
        try:
            text = path.read_text()
        except OSError as exc:
            raise GpuCatalogError(f"gpu catalog {path}: cannot read it ({exc.strerror}); pass an existing YAML "
                                  "file to --gpu-catalog or FRENZY_GPU_CATALOG, or unset it") from None
        user, problems = parse_rows(text, origin)
    types = {}
    for row in merge([r for _, r in bundled], user, origin, problems):
        row = dict(row, aliases=tuple(row.get("aliases", ())), memory_bytes=int(row["memory_bytes"]))
        try:
            types[row["name"]] = GpuType(**row)
        except ValueError as exc:
            raise GpuCatalogError(f"gpu catalog {origin}: {exc}") from None
    return types

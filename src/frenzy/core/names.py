"""Which known names to suggest for an unknown one (catalog.canonical_name's "Did you mean")."""

from __future__ import annotations

import difflib
import re
from typing import Annotated

from pydantic import BeforeValidator


def _model_token(key: str) -> str:
    """The first word with a digit that is not a memory size: 'h800' in 'h800-pcie', '4090' in 'rtx-4090-24g'."""
    for word in re.split(r"[^a-z0-9.]+", key):
        if any(c.isdigit() for c in word) and not re.fullmatch(r"\d+gb?", word):
            return word
    return ""


def _family(token: str) -> tuple[str, int] | None:
    """'h800' and 'h100' share ('h', 3); 'mi300x' is ('mi', 3). A bare number ('8b', '4090') names no
    family: sizes and versions share digits by chance."""
    match = re.match(r"([a-z]+)(\d+)", token)
    return (match.group(1), len(match.group(2))) if match else None


def closest_names(key: str, keys: list[str]) -> list[str]:
    """Known keys nearest to `key`: the same model first (h800 for 'h800-pcie'), then the same family
    (h100 for h800), then spelling. Spelling alone matched 'mi300x' to '3090': an unrelated name must be
    spelled nearly alike to be offered."""
    token = _model_token(key)
    family = _family(token)
    scored = []
    for candidate in keys:
        ratio = difflib.SequenceMatcher(None, key, candidate).ratio()
        other = _model_token(candidate)
        tier = 2 if token and other == token else 1 if family and _family(other) == family else 0
        if ratio >= (0.3 if tier else 0.7):
            scored.append((-tier, -ratio, candidate))
    return [candidate for *_, candidate in sorted(scored)][:8]


def _int_as_text(value):
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


# A name in a YAML file (a GPU type or alias, a cluster, a team, a user): YAML reads an unquoted 4090 or
# 123456 as an int, which is still that name. Other numbers are refused, since YAML changed their text
# (1.5e+3 reads as 1500.0): such a name must be quoted.
YamlName = Annotated[str, BeforeValidator(_int_as_text)]

"""Post-training variants answer to their base model's config.

Instruction tuning, chat tuning, RLHF and the like change weights, not shapes: `Qwen2.5-7B-Instruct`
trains with exactly the memory of `Qwen2.5-7B`. So rather than a table of every fine-tune's name, a
name is reduced to an *architecture key* by dropping well-known post-training tokens (and the release
date that follows them, as in `Mistral-Nemo-Instruct-2407`), and two names with the same key share a
config. Quantised variants (-FP8, -AWQ, -GGUF) are deliberately not stripped: they change memory.

Functions here take names already normalised by the catalog (lower case, '-' separated).
"""

from __future__ import annotations

import re

# Whole '-'-separated tokens only, so 'it' never matches inside a word and 'base' never inside 'database'.
POST_TRAINING_TOKENS = frozenset({
    "instruct", "chat", "it", "base", "pt", "hf", "sft", "dpo", "rlhf", "thinking",
})
# A YYMM release tag after a post-training token: Mistral-Nemo-Base-2407, Qwen3-30B-A3B-Instruct-2507.
_RELEASE_TAG = re.compile(r"2[0-9](0[1-9]|1[0-2])")


def architecture_key(key: str) -> str:
    """The normalised name without its post-training tokens: `qwen/qwen2.5-7b-instruct` ->
    `qwen/qwen2.5-7b`, `mistral-nemo-base-2407` -> `mistral-nemo`. The organisation, if any, stays:
    another organisation's fine-tune may have changed the architecture (a larger vocabulary, say)."""
    org, _, short = key.rpartition("/")
    tokens = short.split("-")
    kept = [t for t in tokens if t not in POST_TRAINING_TOKENS]
    # A release tag is only a date when it follows a stripped token; 'Qwen-1_8B' keeps its digits.
    if len(kept) < len(tokens) and len(kept) > 1 and _RELEASE_TAG.fullmatch(kept[-1]):
        kept.pop()
    if not kept:
        return key
    return f"{org}/{'-'.join(kept)}" if org else "-".join(kept)


def is_variant(key: str) -> bool:
    return architecture_key(key) != key


def variant_table(aliases: dict[str, str]) -> dict[str, str]:
    """Architecture key -> canonical repo id, from a catalog alias table (normalised alias -> repo id).

    When a base model and one of its variants are both bundled (Llama-3.1-8B and -Instruct), the key
    goes to the base: the variant is then only reached by its own name.
    """
    table: dict[str, str] = {}
    for alias, repo_id in sorted(aliases.items(), key=lambda kv: (is_variant(kv[1].lower()), kv[0])):
        table.setdefault(architecture_key(alias), repo_id)
    return table

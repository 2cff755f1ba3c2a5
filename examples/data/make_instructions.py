"""Generate examples/data/instructions.jsonl: a small chat-format instruction data set for demos and
tests, made entirely by this script (no downloads, no copied text). Licence: Apache-2.0, the same as
the Frenzy project; the generated file is covered by it too.

The tasks are short, exactly correct and regular, so a tiny randomly initialised model learns them
within a few hundred steps: small-number arithmetic, reversing a word, the next letter of the
alphabet, and unit conversions; a few rows carry a system message. Deterministic (a fixed seed), so
re-running reproduces the file byte for byte:

    python examples/data/make_instructions.py
"""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

OUT = Path(__file__).with_name("instructions.jsonl")
SEED = 24
WORDS = ["cat", "dog", "sun", "tree", "book", "lamp", "rain", "fish", "bird", "road", "moon", "star",
         "milk", "frog", "ship", "cake", "door", "wind", "leaf", "rock", "gold", "snow", "bell", "kite"]
SYSTEMS = ["You are a concise assistant. Keep every answer short.",
           "You are a helpful tutor. Give short, exact answers."]
UNITS = [("meters", "centimeters", 100), ("kilometers", "meters", 1000), ("hours", "minutes", 60),
         ("minutes", "seconds", 60), ("kilograms", "grams", 1000), ("days", "hours", 24)]


def arithmetic(rng: random.Random) -> tuple[str, str]:
    a, b = rng.randint(0, 20), rng.randint(0, 20)
    op = rng.choice(["+", "-", "*"])
    if op == "-" and b > a:
        a, b = b, a
    value = {"+": a + b, "-": a - b, "*": a * b}[op]
    return f"What is {a} {op} {b}?", f"{a} {op} {b} = {value}"


def reverse(rng: random.Random) -> tuple[str, str]:
    word = rng.choice(WORDS)
    return f"Reverse the word '{word}'.", word[::-1]


def next_letter(rng: random.Random) -> tuple[str, str]:
    index = rng.randrange(25)
    letter = string.ascii_lowercase[index]
    return (f"What comes after '{letter}' in the alphabet?",
            f"'{string.ascii_lowercase[index + 1]}' comes after '{letter}'.")


def convert(rng: random.Random) -> tuple[str, str]:
    big, small, factor = rng.choice(UNITS)
    n = rng.randint(1, 9)
    return f"How many {small} are in {n} {big}?", f"{n} {big} = {n * factor} {small}"


TASKS = [arithmetic, reverse, next_letter, convert]


def rows(count: int = 360) -> list[dict]:
    rng = random.Random(SEED)
    out = []
    for i in range(count):
        question, answer = TASKS[i % len(TASKS)](rng)
        messages = [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
        if i % 12 == 5:  # a few rows teach the model to follow a system message too
            messages.insert(0, {"role": "system", "content": SYSTEMS[(i // 12) % len(SYSTEMS)]})
        if i % 30 == 7:  # and a few are two-turn conversations
            q2, a2 = TASKS[(i + 1) % len(TASKS)](rng)
            messages += [{"role": "user", "content": q2}, {"role": "assistant", "content": a2}]
        out.append({"messages": messages})
    return out


def main() -> None:
    OUT.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows()), encoding="utf-8")
    print(f"wrote {OUT} ({len(rows())} rows)")


if __name__ == "__main__":
    main()

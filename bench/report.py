"""Write a benchmark's result into its own section of docs/BENCHMARKS.md (or docs/ACCURACY.md).

Each section sits between `<!-- bench:NAME -->` and `<!-- /bench:NAME -->` markers, so benchmark
scripts can be rerun in any order without touching each other's results.
"""

from __future__ import annotations

import platform
import re
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def machine_line() -> str:
    cpus = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip() or "?"
    return f"{platform.machine()}, {cpus} cores, Python {platform.python_version()}"


def write_section(name: str, markdown: str, doc: str = "docs/BENCHMARKS.md", command: str | None = None) -> None:
    path = ROOT / doc
    text = path.read_text() if path.exists() else f"# {Path(doc).stem.title()}\n"
    command = command or "python " + " ".join(sys.argv)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    body = (f"<!-- bench:{name} -->\n{markdown.rstrip()}\n\n"
            f"_Command: `{command}` — {stamp}, {machine_line()}._\n<!-- /bench:{name} -->")
    pattern = re.compile(rf"<!-- bench:{re.escape(name)} -->.*?<!-- /bench:{re.escape(name)} -->", re.S)
    text = pattern.sub(lambda _: body, text) if pattern.search(text) else text.rstrip() + "\n\n" + body + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)

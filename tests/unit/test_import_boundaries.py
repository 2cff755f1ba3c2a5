"""Layer boundaries (DESIGN.md): only executor/ and train/ (and memory/trace) import torch or ray,
and the predicting commands start without them."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "frenzy"
HEAVY = {"torch", "ray", "transformers", "peft"}
ALLOWED = {"executor", "train"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


PURE_MODULES = [p for p in SRC.rglob("*.py")
                if p.relative_to(SRC).parts[0] not in ALLOWED and "trace" not in p.relative_to(SRC).parts]


@pytest.mark.parametrize("path", PURE_MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_pure_layers_do_not_import_torch_or_ray(path):
    # Imports inside functions are allowed only in cli/, control/ and data/ (commands load heavy
    # extras lazily; data/ loads a model folder's tokenizer with transformers only when there is one).
    if path.relative_to(SRC).parts[0] in ("cli", "control", "data", "demo.py"):
        tree = ast.parse(path.read_text())
        top = {n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))}
        names = set()
        for node in top:
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            names.update(m.split(".")[0] for m in mods)
        assert not names & HEAVY, f"{path} imports {names & HEAVY} at module level"
        return
    assert not _imports(path) & HEAVY, f"{path} imports {_imports(path) & HEAVY}"


@pytest.mark.parametrize("argv", [["memory", "llama-2-7b", "--json"], ["plan", "gpt2", "--seq", "1024", "--json"]])
def test_predicting_commands_do_not_load_torch_or_ray(argv):
    code = ("import sys, io, contextlib\n"
            "from frenzy.cli.main import app\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    try: app({argv!r})\n"
            "    except SystemExit as e: assert e.code in (0, None), e.code\n"
            "heavy = sorted(m for m in ('torch', 'ray', 'transformers', 'peft') if m in sys.modules)\n"
            "print(','.join(heavy))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"loaded: {out.stdout.strip()}"

"""What a `frenzy` command can import, read from the source (no command is run): the third-party
packages reachable from its function, and what pyproject.toml lets an install carry.

Reachable from a function: its module's top-level imports, the imports in its body, the functions of
`frenzy.cli` it calls (followed the same way), and every import of every other frenzy module it
reaches (all of them: outside `frenzy.cli` a module is taken whole). A function only passed along
(a Typer callback) is not followed: commands are checked one by one. An import inside a `try` whose
handler catches ImportError is optional: the code says what to install when it is missing.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SRC = ROOT / "src"
CLI = "frenzy.cli"
_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError"}


def normalise(dist: str) -> str:
    return re.sub(r"[-_.]+", "-", dist).lower()


def _requirement(text: str) -> tuple[str, set[str], str]:
    """(distribution, its extras, marker) of a requirement string such as 'ray[default,train]==2.60.0'."""
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?[^;]*(?:;(.*))?$", text)
    extras = {normalise(e) for e in (m.group(2) or "").split(",") if e.strip()}
    return normalise(m.group(1)), extras, m.group(3) or ""


def declared() -> tuple[list[str], dict[str, list[str]]]:
    """pyproject.toml's base dependencies and its extras, as requirement strings."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project["dependencies"], project["optional-dependencies"]


def installable(requirements: list[str]) -> set[str]:
    """The distributions an install of these requirements carries: each with what it requires, with
    the extras asked for (installed metadata; a distribution not installed here adds only itself)."""
    found: set[str] = set()
    todo = [_requirement(r)[:2] for r in requirements]
    while todo:
        dist, extras = todo.pop()
        key = (dist, frozenset(extras))
        if key in found:
            continue
        found.add(key)
        try:
            needs = importlib.metadata.requires(dist) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for need in needs:
            name, sub_extras, marker = _requirement(need)
            wanted = re.findall(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
            if not wanted or any(normalise(w) in extras for w in wanted):
                todo.append((name, sub_extras))
    return {dist for dist, _ in found}


def distributions(package: str) -> set[str]:
    """The distributions that provide an importable top-level package (its own name if none here)."""
    return {normalise(d) for d in _providers().get(package, [package])}


@cache
def _providers() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


@cache
def _tree(module: str) -> ast.Module | None:
    base = SRC / module.replace(".", "/")
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return ast.parse(path.read_text())
    return None


def _is_module(name: str) -> bool:
    return _tree(name) is not None


def _guarded(tree: ast.AST) -> set[int]:
    """ids of import nodes inside a `try` that catches ImportError."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(_catches_import_error(h) for h in node.handlers):
            ids.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return ids


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in _IMPORT_ERRORS for n in names)


def _imports(nodes, guarded: set[int]) -> list[tuple[str, list[str]]]:
    """(module, names imported from it) for every unguarded import among `nodes`."""
    out = []
    for node in nodes:
        if id(node) in guarded:
            continue
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.module, [a.name for a in node.names]))
    return out


def _top_level_nodes(tree: ast.Module):
    """The nodes that run when the module is imported (not those inside its functions)."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


class Reach:
    """Third-party top-level packages reachable from functions of frenzy modules."""

    def __init__(self):
        self.packages: set[str] = set()
        self._seen: set[tuple[str, str | None]] = set()

    def function(self, module: str, name: str | None) -> None:
        """`name` None: the module's top level only (for frenzy.cli) or the whole module (elsewhere)."""
        if (module, name) in self._seen:
            return
        self._seen.add((module, name))
        tree = _tree(module)
        guarded = _guarded(tree)
        whole = name is None and not module.startswith(CLI)
        nodes = list(ast.walk(tree)) if whole else list(_top_level_nodes(tree))
        if name is not None:
            self.function(module, None)
            body = next(n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                        and n.name == name)
            nodes = list(ast.walk(body))
        if module.startswith(CLI):
            self._calls(module, tree, nodes)
        for imported, names in _imports(nodes, guarded):
            self._import(imported, names)

    def _import(self, module: str, names: list[str]) -> None:
        if not module.startswith("frenzy"):
            root = module.split(".")[0]
            if root not in sys.stdlib_module_names and root != "__future__":
                self.packages.add(root)
            return
        for part in range(2, module.count(".") + 2):  # importing a.b.c runs a.b's __init__ too
            self.function(".".join(module.split(".")[:part]), None)
        for name in names:
            if _is_module(f"{module}.{name}"):
                self.function(f"{module}.{name}", None)

    def _calls(self, module: str, tree: ast.Module, nodes) -> None:
        """Follow the frenzy.cli functions called among `nodes`: the module's own and those it imported."""
        used = {n.func.id for n in nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        for name in used:
            if _defines_function(module, name):
                self.function(module, name)
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(CLI):
                for alias in node.names:
                    if (alias.asname or alias.name) in used and _defines_function(node.module, alias.name):
                        self.function(node.module, alias.name)


def _defines_function(module: str, name: str) -> bool:
    tree = _tree(module)
    return tree is not None and any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name
                                    for n in tree.body)


def reachable(module: str, function: str | None = None) -> set[str]:
    reach = Reach()
    reach.function(module, function)
    return reach.packages

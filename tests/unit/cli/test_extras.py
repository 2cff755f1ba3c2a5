"""Every extra installs alone and works: each command imports only what the base dependencies and
the extras it is listed under carry (pyproject.toml against the source; see imports.py)."""

from __future__ import annotations

from functools import cache

import pytest

from frenzy.cli.main import app
from tests.unit.cli.imports import declared, distributions, installable, reachable

CLIENT = ["submit", "jobs", "status", "logs", "cancel", "cluster", "artifacts", "login"]
TOKENS = ["token create", "token list", "token revoke"]
# Each command with the extras it needs beside the base dependencies. A new command goes here.
NEEDS: dict[str, tuple[str, ...]] = {
    "memory": (), "plan": (), "models": (), "gpus": (),
    "simulate": ("sim",),  # its plots (matplotlib)
    **{c: ("client",) for c in CLIENT},
    **{c: ("serve",) for c in TOKENS},  # they open the job store
    "serve": ("serve", "ray"),
    "ray-node-args": ("ray",),
}
# What else an extra alone must run: `pip install 'frenzy[serve,ray]'` puts the client commands on the
# server machine; `memory --trace` loads the tracer only when asked (its import says what to install).
ALSO: dict[str, list[str]] = {"serve": CLIENT + TOKENS}
MODULES: dict[tuple[str, ...], list[str]] = {("trace",): ["frenzy.memory.trace"],
                                             ("ray",): ["frenzy.train.worker", "frenzy.executor.ray_executor"]}
NO_COMMANDS = {"dev", "bench"}  # the test suite; other estimators for bench/accuracy.py


def commands(typer_app=app, prefix: str = ""):
    for info in typer_app.registered_commands:
        yield prefix + (info.name or info.callback.__name__.replace("_", "-")), info.callback
    for group in typer_app.registered_groups:
        yield from commands(group.typer_instance, f"{prefix}{group.name} ")


CALLBACKS = dict(commands())


def missing(packages: set[str], extras: tuple[str, ...]) -> set[str]:
    """The imported packages that the base dependencies plus `extras` do not install."""
    installed = _installed(extras)
    return {p for p in packages if not distributions(p) & installed}


@cache
def _installed(extras: tuple[str, ...]) -> set[str]:
    base, all_extras = declared()
    return installable(base + [r for e in extras for r in all_extras[e]])


def test_every_command_and_every_extra_is_accounted_for():
    assert set(CALLBACKS) == set(NEEDS), "list a new command in NEEDS with the extras it needs"
    _, extras = declared()
    used = {e for needs in NEEDS.values() for e in needs} | {e for key in MODULES for e in key} | set(ALSO)
    assert set(extras) == used | NO_COMMANDS, "say what a new extra runs (NEEDS, MODULES or NO_COMMANDS)"


@pytest.mark.parametrize("command", sorted(NEEDS))
def test_a_command_imports_only_what_its_extras_install(command):
    callback = CALLBACKS[command]
    packages = reachable(callback.__module__, callback.__name__)
    assert not missing(packages, NEEDS[command]), (
        f"`frenzy {command}` imports {sorted(missing(packages, NEEDS[command]))}, which neither the base "
        f"dependencies nor the extras {NEEDS[command]} install: declare them, or import them inside a "
        "try/except ImportError that says what to install")


@pytest.mark.parametrize("extra, command", [(e, c) for e, cs in ALSO.items() for c in cs])
def test_an_extra_alone_runs_the_commands_it_promises(extra, command):
    callback = CALLBACKS[command]
    assert not missing(reachable(callback.__module__, callback.__name__), (extra,))


@pytest.mark.parametrize("extras, module", [(e, m) for e, ms in MODULES.items() for m in ms])
def test_the_modules_an_extra_exists_for_import_only_what_it_installs(extras, module):
    assert not missing(reachable(module), extras)


def test_the_check_sees_what_an_install_lacks():
    """The check is not vacuous: against the real source it finds what a smaller install lacks."""
    jobs = CALLBACKS["jobs"]
    assert missing(reachable(jobs.__module__, jobs.__name__), ()) == {"httpx"}  # the bug of issue 26
    serve = CALLBACKS["serve"]
    assert {"ray", "torch"} <= missing(reachable(serve.__module__, serve.__name__), ("serve",))
    assert missing(reachable("frenzy.memory.trace"), ()) >= {"torch", "transformers"}
    assert missing({"fastapi", "starlette", "yaml"}, ("serve",)) == set()  # starlette: what fastapi requires

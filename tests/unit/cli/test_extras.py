"""Every extra installs alone and works: each command imports only what the base dependencies and
the extras it is listed under carry (pyproject.toml against the source; see imports.py)."""

from __future__ import annotations

from functools import cache

import pytest

from frenzy.cli.main import app
from tests.unit.cli.imports import declared, distributions, installable, reachable

CLIENT = ["submit", "jobs", "status", "logs", "cancel", "cluster", "artifacts", "login",
          "team set", "team add-user", "team remove-user", "team delete", "team list"]
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


# ---- the same, run: the commands in a process that cannot import what the install would lack ------------

RUN_BLOCKED = """
import contextlib, importlib.abc, io, json, sys
blocked = set(json.loads(sys.argv[1]))

class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.partition(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r} (not in this install)", name=name)

sys.meta_path.insert(0, NotInstalled())
from frenzy.cli.main import app
results = []
for argv in json.loads(sys.argv[2]):
    out = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            app(argv, prog_name="frenzy")
        except SystemExit as exc:
            code = exc.code or 0
    results.append([argv[0], code, out.getvalue()])
print(json.dumps(results))
"""


def blocked_for(extras: tuple[str, ...]) -> list[str]:
    """Every installed top-level package that the base dependencies plus `extras` do not install."""
    from tests.unit.cli.imports import _providers, normalise

    installed = _installed(extras)
    return sorted(p for p, dists in _providers().items()
                  if p != "frenzy" and not p.startswith("_") and not {normalise(d) for d in dists} & installed)


def run_blocked(extras: tuple[str, ...], argvs: list[list[str]], env: dict) -> list:
    import json
    import os
    import subprocess
    import sys

    from tests.unit.cli.imports import ROOT

    out = subprocess.run([sys.executable, "-c", RUN_BLOCKED, json.dumps(blocked_for(extras)), json.dumps(argvs)],
                         capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src"), **env})
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.splitlines()[-1])


def test_the_base_install_runs_the_predicting_commands():
    blocked = blocked_for(())
    assert {"httpx", "fastapi", "torch", "ray", "sqlalchemy"} <= set(blocked)
    results = run_blocked((), [["memory", "llama-3.2-1b", "--json"], ["plan", "gpt2", "--seq", "1024", "--json"],
                               ["models", "qwen", "--json"], ["gpus", "--json"]], {})
    assert [code for _, code, _ in results] == [0] * 4, results


def test_the_client_extra_alone_runs_every_client_command(server, tmp_path):
    from tests.unit.cli.imports import ROOT

    spec = str(ROOT / "examples" / "tiny-llama.yaml")
    first = run_blocked(("client",), [["submit", spec, "--url", server, "--json"]], {})
    assert first[0][1] == 0, first
    import json

    job_id = json.loads(first[0][2])["id"]
    argvs = [["jobs", "--url", server, "--json"], ["status", job_id, "--url", server, "--json"],
             ["logs", job_id, "--url", server], ["cluster", "--url", server],
             ["artifacts", job_id, "--url", server], ["cancel", job_id, "--url", server],
             ["login", "--token", "frz.t-1.s", "--url", "http://127.0.0.1:9"]]
    results = run_blocked(("client",), argvs, {"FRENZY_CREDENTIALS": str(tmp_path / "credentials")})
    assert [(name, code) for name, code, _ in results] == [(a[0], 0) for a in argvs], results
    # ... and what it lacks is refused in one line, not a traceback
    served = run_blocked(("client",), [["serve", "--port", "1"], ["token", "list"]], {})
    assert all(code == 1 and "needs the Python package" in out and "install" in out.split("(", 1)[1]
               and "Traceback" not in out and len(out.strip().splitlines()) == 1 for _, code, out in served), served

"""What every `frenzy` command prints: one JSON document with --json, errors as one line or one JSON
object, and tables as wide as their content when stdout is not a terminal.

With --json, stdout carries exactly one JSON document whatever happens: the command's answer, or on
failure `{"error": ..., "hint": ...}` (plus `status` for an HTTP error) with a non-zero exit code.
Warnings stay on stderr as text. Without --json an error is one line on stderr, never a traceback
(FRENZY_DEBUG=1 shows the traceback of an unexpected error).
"""

from __future__ import annotations

import json
import os
import re
import sys
from enum import Enum, StrEnum
from typing import Annotated, Any

import typer
from rich.console import Console, ConsoleDimensions
from typer.core import TyperGroup

JSON_FLAG = "--json"
DEBUG_ENV = "FRENZY_DEBUG"
# A pipe or file has no width: wide enough that no cell is cut or wrapped (Rich would otherwise assume 80).
UNCUT_WIDTH = 10_000
USAGE_EXIT = 2  # something for the user to change: bad input, a 4xx, no server (as Click's usage errors)
FAILURE_EXIT = 1  # anything else: a package the install lacks, an internal error, a job that did not succeed

Json = Annotated[bool, typer.Option(JSON_FLAG, help="print one JSON object on stdout (errors too: "
                                                    "{\"error\", \"hint\"} with a non-zero exit code)")]


class _State:
    json = False  # set from the command line before anything runs, so usage errors know it too
    command = "frenzy"  # the command being run, for the hint an error gives when its message has none


def json_mode() -> bool:
    return _State.json


class WideConsole(Console):
    """A Rich console whose width, when stdout is not a terminal, is $COLUMNS or wide enough for
    anything; read at every print, so a redirected or captured stdout is measured as it is now."""

    @property
    def size(self) -> ConsoleDimensions:
        if self.is_terminal:
            return super().size
        columns = os.environ.get("COLUMNS", "")
        return ConsoleDimensions(int(columns) if columns.isdigit() and int(columns) > 0 else UNCUT_WIDTH, 25)

    @size.setter
    def size(self, new_size) -> None:  # Console.__init__ never sets it; Rich's API allows it
        Console.size.fset(self, new_size)


console = WideConsole()


def emit(document: Any) -> None:
    """The command's answer with --json: one JSON document on stdout."""
    print(json.dumps(document, indent=2))


def hint_of(message: str) -> str:
    """What to change, from a message written as 'what is wrong; what to change' (core/errors.py's
    convention) or ending in 'Did you mean: ...?'; empty when the message does not say."""
    suggestion = re.search(r"(Did you mean: .*|Known: .*|`[^`]+` lists them\.)$", message)
    if suggestion:
        return suggestion.group(1)
    depth = 0  # a library's own error quoted in parentheses may hold "; " of its own
    for at, char in enumerate(message):
        depth += (char in "([{") - (char in ")]}")
        if depth == 0 and message.startswith("; ", at):
            return message[at + 2:]
    return ""


def report(message: str, hint: str | None = None, **extra: Any) -> None:
    """Print an error: a JSON object on stdout with --json, else one line on stderr."""
    message = " ".join(str(message).split())  # one line, whatever the source wrote
    hint = hint if hint is not None else hint_of(message) or f"see `{_State.command} --help`"
    if json_mode():
        emit({"error": message, "hint": hint, **extra})
    else:
        typer.secho(f"error: {message}" + (f" ({hint})" if hint and hint not in message else ""),
                    fg=typer.colors.RED, err=True)


def fail(message: str, hint: str | None = None, code: int = USAGE_EXIT, **extra: Any) -> typer.Exit:
    """Report an error and return the Exit to raise (`raise fail(...) from None`)."""
    report(message, hint, **extra)
    return typer.Exit(code=code)


def choices(enum_cls: type[Enum], keys: list[str] | None = None) -> type[StrEnum]:
    """A string Enum of a domain enum's spellings, for Typer: shown in --help, completed by the shell,
    and checked by Click before the command runs. The domain enum stays the one list of values."""
    return choice_names(enum_cls.__name__, keys or [str(m.value) for m in enum_cls])


def choice_names(name: str, keys: list[str]) -> type[StrEnum]:
    """A StrEnum whose members are the strings themselves (str(member) == member: it passes as text)."""
    return StrEnum(f"{name}Choice", {k: k for k in keys})


def _command_words(group, args: list[str]) -> list[str]:
    """The (sub)command names at the start of the command line, e.g. ['token', 'create']."""
    words = []
    for arg in args:
        command = getattr(group, "commands", {}).get(arg)
        if command is None:
            break
        words.append(arg)
        group = command
    return words


def _json_requested(args: list[str]) -> bool:
    return JSON_FLAG in (args[:args.index("--")] if "--" in args else args)


class FrenzyGroup(TyperGroup):
    """The root command: decides JSON mode from the command line and turns every error (Click's
    usage errors included) into one line or one JSON object."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        args = list(sys.argv[1:] if args is None else args)
        _State.json = _json_requested(args)
        _State.command = " ".join(["frenzy", *_command_words(self, args)])
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except typer.TyperException as exc:  # Typer >= 0.29 carries its own Click; its errors derive from this
            code = _usage_error(exc)
        except typer.Abort:
            code = _report_exit("aborted", "", FAILURE_EXIT)
        except Exception as exc:
            if os.environ.get(DEBUG_ENV):
                raise
            code = _unexpected(exc)
        sys.exit(code if isinstance(code, int) else 0)


def _usage_error(exc: typer.TyperException) -> int:
    """A bad command line, in one line; a group called without a command shows its help instead."""
    message = exc.format_message().replace("Value error, ", "")  # the prefix of Typer's pydantic coercion
    if type(exc).__name__ == "NoArgsIsHelpError":  # Typer's private class: `frenzy` or `frenzy token` alone
        if message.strip():  # Rich help is printed while it is made; plain help is the message
            exc.show()
        return exc.exit_code
    return _report_exit(message, f"see `{_State.command} --help`", exc.exit_code)


def _unexpected(exc: Exception) -> int:
    """One line for what no command reported itself: a package an extra carries, or a bug."""
    package = exc.name or "" if isinstance(exc, ModuleNotFoundError) else ""
    if package and not package.startswith("frenzy"):
        return _report_exit(f"this command needs the Python package '{package.partition('.')[0]}', which is "
                            "not installed", _install_hint(package), FAILURE_EXIT)
    if isinstance(exc, OSError) and exc.filename is not None:  # a path given that is a folder, unreadable...
        return _report_exit(f"cannot use {exc.filename}: {exc.strerror or exc}",
                            f"check the paths given to `{_State.command}`", USAGE_EXIT)
    return _report_exit(f"internal error: {type(exc).__name__}: {exc}",
                        f"set {DEBUG_ENV}=1 to see the traceback and report it", FAILURE_EXIT)


def _install_hint(module: str) -> str:
    """Which of Frenzy's extras carry a package, from the installed package's own metadata."""
    import importlib.metadata

    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    try:
        requires = importlib.metadata.requires("frenzy") or []
    except importlib.metadata.PackageNotFoundError:
        requires = []
    root = norm(module.partition(".")[0])
    extras = sorted({m.group(2) for r in requires
                     if (m := re.match(r"([A-Za-z0-9._-]+).*extra\s*==\s*['\"]([^'\"]+)['\"]", r))
                     and norm(m.group(1)) == root and m.group(2) not in ("dev", "bench")})
    if not extras:
        return f"install {module.partition('.')[0]} (see README.md, Set up)"
    return " or ".join(f"pip install 'frenzy[{e}]'" for e in extras)


def _report_exit(message: str, hint: str, code: int) -> int:
    report(message, hint)
    return code

"""A job spec file as `frenzy submit` sends it: a mapping of JSON values with its paths made absolute,
or one line (exit 2; JSON under --json) saying what to change. The server checks the fields themselves
(unknown, wrong type, out of bounds: a 422 naming each)."""

from __future__ import annotations

import json
from pathlib import Path

from frenzy.cli.output import fail

MAX_SPEC_BYTES = 1 << 20  # as the server's default body limit: a job spec is a few lines


def read_spec(spec: Path) -> dict:
    """The spec's settings, with the model, dataset and validation paths relative to the spec's folder."""
    body = _read(spec)
    if isinstance(body.get("model"), str) and not body["model"].startswith("/"):
        body["model"] = _beside(spec, body["model"], only_if_there=True)  # else a catalog or Hub name
    for key in ("dataset", "validation"):  # data paths relative to the spec file
        value = body.get(key)
        if isinstance(value, str) and value != "synthetic":
            body[key] = _beside(spec, value, only_if_there=False)
    return body


def _beside(spec: Path, value: str, only_if_there: bool) -> str:
    """A path in the spec, relative to the spec's folder, made absolute for the server; a value that
    is no usable path (too long, a NUL) goes as written, for the server to refuse with the field's name."""
    try:
        local = spec.parent / value
        if Path(value).is_absolute() or (only_if_there and not local.exists()):
            return value
        return str(local.resolve())
    except (OSError, ValueError):
        return value


def _read(spec: Path) -> dict:
    """The job spec file as a mapping of JSON values, or a one-line error (exit 2) saying what to change.
    The server checks the fields themselves (unknown, wrong type, out of bounds: a 422 naming each)."""
    import yaml

    def refuse(why: str):
        raise fail(f"{spec} {why}") from None

    if not spec.exists():
        refuse("does not exist; pass a YAML job spec (see examples/)")
    if spec.is_dir():
        refuse("is a folder; pass a YAML job spec file (see examples/*.yaml)")
    if not spec.is_file():
        refuse("is not a regular file; pass a YAML job spec file (see examples/*.yaml)")
    if spec.stat().st_size > MAX_SPEC_BYTES:
        refuse(f"is larger than {MAX_SPEC_BYTES >> 20} MiB; a job spec is a few lines, with data in files it names")
    try:
        text = spec.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        refuse(f"is not UTF-8 text ({exc.reason} at byte {exc.start}); pass a YAML job spec")
    except OSError as exc:
        refuse(f"cannot be read ({exc.strerror or type(exc).__name__}); check its permissions")
    try:
        body = yaml.load(text, Loader=_no_alias_loader())  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        refuse(f"is not valid YAML ({getattr(exc, 'problem', None) or type(exc).__name__}{where}); fix the file")
    if not isinstance(body, dict):
        found = "empty" if body is None else {list: "a list", str: "a single string", bool: "a true/false value"}.get(
            type(body), "a single value")
        refuse(f"is {found}, not a mapping of job settings; write e.g. `model: gpt2` and `steps: 10`, one per line")
    try:
        json.dumps(body, allow_nan=False)
    except (TypeError, ValueError) as exc:  # a YAML date, set, binary or .nan: the API takes JSON only
        refuse(f"holds a value JSON cannot carry ({exc}); quote it or write a number")
    return body


def _no_alias_loader():
    """A safe YAML loader that refuses aliases (*name): a few lines of nested aliases expand into
    gigabytes when the spec is sent as JSON, and a job spec never needs them."""
    import yaml

    class NoAliasLoader(yaml.SafeLoader):
        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.composer.ComposerError(None, None, "YAML aliases (*name) are not allowed in a job spec",
                                                  event.start_mark)
            return super().compose_node(parent, index)

    return NoAliasLoader

"""A job's artifacts on the server's storage: listed, and served one file at a time, never anything
outside the job's artifact folder (no `..`, no absolute path, no symlink leading out)."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path, PurePosixPath

from frenzy.core.errors import FrenzyError
from frenzy.train.config import ARTIFACTS
from frenzy.train.manifest import MANIFEST


class UnknownArtifactError(FrenzyError):
    """No such file among the job's artifacts (answered 404)."""


def artifact_root(storage_root: Path, job_id: str) -> Path:
    return Path(storage_root).expanduser() / job_id / ARTIFACTS


def list_files(root: Path) -> list[tuple[str, int]]:
    """(relative POSIX path, bytes) of every regular file under root, sorted; symlinks are skipped."""
    if not root.is_dir():
        return []
    found = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in files:
            path = Path(folder) / name
            info = path.lstat()
            if stat.S_ISREG(info.st_mode) and not name.endswith(".tmp"):
                found.append((path.relative_to(root).as_posix(), info.st_size))
    return sorted(found)


def is_ready(root: Path) -> bool:
    """The manifest is written last: with it, every weight file is in place."""
    return (root / MANIFEST).is_file()


def resolve(root: Path, relative: str) -> Path:
    """The file `relative` names inside root; UnknownArtifactError for anything else."""
    parts = PurePosixPath(relative).parts
    if not relative or "\x00" in relative or relative.startswith("/") or ".." in parts or "\\" in relative:
        raise UnknownArtifactError(f"'{relative}' is not a path inside the job's artifacts; "
                                   "list them with GET /v1/jobs/{id}/artifacts")
    base = os.path.realpath(root)
    target = os.path.realpath(os.path.join(base, *parts))
    if os.path.commonpath([base, target]) != base or not os.path.isfile(target):
        raise UnknownArtifactError(f"the job has no artifact '{relative}'; "
                                   "list them with GET /v1/jobs/{id}/artifacts")
    return Path(target)


class RangeError(FrenzyError):
    """A Range header this file cannot answer: `status` 400 (malformed) or 416 (past its end)."""

    def __init__(self, message: str, status: int, size: int):
        super().__init__(message)
        self.status, self.size = status, size


# One range of a Range header: START-END, START- or -SUFFIX, in ASCII digits; 19 digits reach past
# any file, and a longer number is refused before int() meets it.
_BYTE_RANGE = re.compile(r"([0-9]{0,19})-([0-9]{0,19})")


def check_range(header: str | None, size: int) -> None:
    """Refuse, with what to ask for instead, a Range header the file response would answer in plain
    text (malformed: 400; starting past the end: 416); None and satisfiable ranges pass."""
    if header is None:
        return
    how = f"ask for bytes=START-END within the file's {size:,} bytes (e.g. bytes=0-{max(size - 1, 0)})"
    units, _, ranges = header.partition("=")
    parts = [_BYTE_RANGE.fullmatch(part.strip()) for part in ranges.split(",")]
    if units.strip().lower() != "bytes" or not all(parts) or any(p.group(1) == p.group(2) == "" for p in parts):
        raise RangeError(f"Range {header[:40]!r} is not a byte range; {how}", 400, size)
    for start, end in (p.groups() for p in parts):
        if start and end and int(end) < int(start):
            raise RangeError(f"Range {header[:40]!r} ends before it starts; {how}", 400, size)
        if (int(start) if start else size - int(end)) >= size:  # a suffix of 0 bytes too
            raise RangeError(f"Range {header[:40]!r} starts past the end of the file; {how}", 416, size)

"""Reading a file someone named without letting it hang or flood the process.

A path in a job (a config.json, a data file) may name a FIFO, a device such as /dev/zero, or a file
far larger than it claims to be. So every such read:
  * opens with O_NONBLOCK (opening a FIFO with no writer would otherwise block for ever),
  * checks the opened descriptor with fstat (what is checked is what is read: no swap between a
    stat of the path and the open), and refuses anything but a regular file before reading a byte,
  * reads at most `max_bytes` (+1 to notice a file that grew after the fstat).
"""

from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from frenzy.core.errors import InvalidConfigError

_CHUNK = 1 << 20


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


@contextmanager
def open_regular(path: str | Path, *, what: str = "file", follow_links: bool = True) -> Iterator[tuple[int, int]]:
    """(descriptor, size) of a regular file opened without blocking; closed on exit. Raises
    InvalidConfigError (with what to change) for a missing path, a folder, a FIFO or a device, and,
    unless `follow_links`, a symbolic link (a secret is read only from the file its owner wrote)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise InvalidConfigError(f"{what} {path} does not exist; pass the path of an existing file") from None
    except IsADirectoryError:
        raise InvalidConfigError(f"{what} {path} is a folder; pass one file") from None
    except (OSError, ValueError) as exc:  # permissions, a NUL in the name, a name too long
        raise InvalidConfigError(f"{what} {path} cannot be opened ({type(exc).__name__}); pass a readable "
                                 "regular file") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InvalidConfigError(f"{what} {path} is {_kind(info.st_mode)}, not a regular file; pass a file")
        yield fd, info.st_size
    finally:
        os.close(fd)


def read_regular(path: str | Path, *, max_bytes: int, what: str = "file") -> bytes:
    """The bytes of a regular file of at most max_bytes (see the module docstring)."""
    with open_regular(path, what=what) as (fd, size):
        if size > max_bytes:
            raise InvalidConfigError(f"{what} {path} is {size:,} bytes, over the {max_bytes:,} a {what} can be "
                                     "here; pass a smaller file")
        return read_descriptor(fd, max_bytes=max_bytes, what=f"{what} {path}")


def read_descriptor(fd: int, *, max_bytes: int, what: str = "file") -> bytes:
    """Up to max_bytes from an open descriptor; a file that grew past the limit is refused."""
    chunks, left = [], max_bytes + 1
    while left > 0:
        chunk = os.read(fd, min(left, _CHUNK))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise InvalidConfigError(f"{what} is over the {max_bytes:,}-byte limit; pass a smaller file")
    return data

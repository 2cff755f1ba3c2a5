"""The SQLite job store's file: private to the operator, and never anything but a SQLite database.

A store URL is an operator's or a CLI user's input (`--db-url`, FRENZY_DB_URL), and opening a store
narrows the file's permissions: so the file a URL names is first checked to be a SQLite database (or
a new, empty file), and anything else, a folder, a FIFO, /etc/passwd, is refused untouched.
"""

from __future__ import annotations

import os
from pathlib import Path

import sqlalchemy as sa

from frenzy.core.errors import InvalidConfigError
from frenzy.core.safe_read import open_regular

SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite 3 database file


def private_sqlite_file(url: str, own_folder: Path) -> None:
    """Create a SQLite database file 0600 in a 0700 folder before SQLite does (SQLite gives its -wal
    and -shm files the database file's mode), and narrow an existing one that is wider. `own_folder`
    (~/.frenzy) is Frenzy's own: narrowed too when wider."""
    database = sa.engine.make_url(url).database
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    path = Path(database)  # as SQLite will open it (no ~ expansion)
    if not path.parent.exists():
        path.parent.mkdir(mode=0o700, parents=True)
    elif path.parent == own_folder and path.parent.stat().st_mode & 0o077:
        try:
            path.parent.chmod(0o700)  # ~/.frenzy is Frenzy's own: earlier versions made it 0755
        except PermissionError:
            pass
    if os.path.lexists(path):
        _check_sqlite_file(path)  # before any chmod: a URL may name any file, /etc/passwd included
    else:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    for f in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        if f.exists() and f.stat().st_mode & 0o077 and f.stat().st_uid == os.getuid():
            f.chmod(0o600)


def _check_sqlite_file(path: Path) -> None:
    """An existing file a SQLite URL names must be a SQLite database (or empty, as created above):
    anything else (a folder, a FIFO, a text file) is refused untouched, with what to pass instead."""
    try:
        with open_regular(path, what="job store") as (fd, _size):  # never blocks on a FIFO
            head = os.read(fd, len(SQLITE_HEADER))
    except InvalidConfigError as exc:
        raise sa.exc.ArgumentError(f"{exc}; pass --db-url sqlite:///PATH of a job store or of a new file") from None
    if head and head != SQLITE_HEADER:
        raise sa.exc.ArgumentError(f"{path} exists and is not a SQLite database; pass --db-url sqlite:///PATH of a "
                                   "job store or of a new file")

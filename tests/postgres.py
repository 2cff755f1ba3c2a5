"""A throwaway PostgreSQL for tests and benchmarks: Debian's server, installed when missing (as root),
started by `initdb` + `pg_ctl` in a temporary folder on a Unix socket, and removed afterwards."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path


class Unavailable(RuntimeError):
    """Why no PostgreSQL could be started here."""


def _pg_bin() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return os.path.dirname(found[-1]) if found else None


def _install() -> str | None:
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return None
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "postgresql"]):
        if subprocess.run(cmd, env=env, capture_output=True, timeout=600).returncode != 0:
            return None
    return _pg_bin()


@contextmanager
def local_postgres(port: int = 5544):
    """Yields a SQLAlchemy URL of a fresh database; raises Unavailable with the reason."""
    bindir = _pg_bin() or _install()
    if bindir is None:
        raise Unavailable("PostgreSQL is not installed and could not be installed from the distribution's "
                          "packages (needs root and apt-get); install `postgresql`")
    # Not under pytest's tmp folder: that is private to root, and the server runs as `postgres`.
    base = Path(tempfile.mkdtemp(prefix="frenzy-pg-"))
    base.chmod(0o755)
    data, sock = base / "data", base / "sock"
    sock.mkdir()
    user = None if os.geteuid() != 0 else "postgres"  # the server refuses to run as root
    if user:
        shutil.chown(base, user)
        shutil.chown(sock, user)

    def run(*args):
        cmd = [*(["runuser", "-u", user, "--"] if user else []), *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    try:
        out = run(f"{bindir}/initdb", "-D", str(data), "-U", "postgres", "--auth=trust")
        if out.returncode:
            raise Unavailable(f"initdb failed: {out.stderr[-500:]}")
        out = run(f"{bindir}/pg_ctl", "-D", str(data), "-l", str(base / "log"), "-w", "-o",
                  f"-k {sock} -c listen_addresses='' -p {port}", "start")
        if out.returncode:
            raise Unavailable(f"PostgreSQL did not start: {out.stderr[-500:]}")
        try:
            run(f"{bindir}/createdb", "-h", str(sock), "-p", str(port), "-U", "postgres", "frenzy")
            yield f"postgresql+psycopg://postgres@/frenzy?host={sock}&port={port}"
        finally:
            run(f"{bindir}/pg_ctl", "-D", str(data), "-m", "fast", "-w", "stop")
            time.sleep(0.2)
    finally:
        shutil.rmtree(base, ignore_errors=True)

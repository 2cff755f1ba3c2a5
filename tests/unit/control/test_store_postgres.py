"""The job store against a real PostgreSQL: installed from Debian's packages when missing (as
root), started in a temporary folder on a Unix socket, and removed afterwards."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.unit.control.test_store import exercise_store

pytestmark = pytest.mark.slow


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


@pytest.fixture(scope="module")
def postgres_url():
    pytest.importorskip("psycopg", reason="psycopg is not installed (the serve extra)")
    bindir = _pg_bin() or _install()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed and could not be installed from the distribution's packages "
                    "(needs root and apt-get); install `postgresql` to run this test")
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

    out = run(f"{bindir}/initdb", "-D", str(data), "-U", "postgres", "--auth=trust")
    if out.returncode:
        pytest.skip(f"initdb failed: {out.stderr[-500:]}")
    out = run(f"{bindir}/pg_ctl", "-D", str(data), "-l", str(base / "log"), "-w", "-o",
              f"-k {sock} -c listen_addresses='' -p 5544", "start")
    if out.returncode:
        pytest.skip(f"PostgreSQL did not start: {out.stderr[-500:]}")
    try:
        run(f"{bindir}/createdb", "-h", str(sock), "-p", "5544", "-U", "postgres", "frenzy")
        yield f"postgresql+psycopg://postgres@/frenzy?host={sock}&port=5544"
    finally:
        run(f"{bindir}/pg_ctl", "-D", str(data), "-m", "fast", "-w", "stop")
        time.sleep(0.2)
        shutil.rmtree(base, ignore_errors=True)


def test_postgres_store_state_machine_and_restart(postgres_url):
    exercise_store(postgres_url)

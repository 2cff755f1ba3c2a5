"""The SQL job store: the state machine is enforced, and everything survives a reopen."""

from __future__ import annotations

import pytest

from frenzy.control.records import AttemptRecord
from frenzy.control.states import AttemptOutcome, InvalidTransitionError, JobState
from frenzy.control.store import SqlJobStore, UnknownJobError


@pytest.fixture
def url(tmp_path):
    return f"sqlite:///{tmp_path / 'frenzy.db'}"


def exercise_store(url: str) -> None:
    """Shared with the PostgreSQL test: the same calls must behave the same on both."""
    store = SqlJobStore(url)
    job = store.create_job(name="a", request={"model": "gpt2"}, priority=2, now=10.0)
    assert job.state is JobState.QUEUED and job.attempts == 0
    with pytest.raises(InvalidTransitionError, match="cannot go from queued to running"):
        store.transition(job.id, JobState.RUNNING, now=11.0)
    store.transition(job.id, JobState.PLANNING, now=11.0, plans=[{"gpu_type": "A10G-24G"}])
    choice = {"gpu_type": "A10G-24G", "memory": {"device_bytes": 1000}}
    store.add_attempt(AttemptRecord(job_id=job.id, number=1, outcome=AttemptOutcome.RUNNING, choice=choice,
                                    allocation=(("n1", 2),), started_at=12.0))
    store.transition(job.id, JobState.PLACED, now=12.0, chosen=choice, allocation=(("n1", 2),), attempts=1,
                     placed_at=12.0)
    store.update_attempt(job.id, 1, observed_peak_bytes=(900, 950), observed_source="emulated")
    store.append_logs(job.id, ["one", "two"], now=12.5)
    store.put_calibration("llama", "A10G-24G", 1.2, 1, now=13.0)
    store.put_calibration("llama", "A10G-24G", 1.25, 2, now=14.0)
    store.close()

    reopened = SqlJobStore(url)  # a restarted server sees exactly the same
    job = reopened.get_job(job.id)
    assert job.state is JobState.PLACED and job.allocation == (("n1", 2),) and job.placed_at == 12.0
    assert job.plans == ({"gpu_type": "A10G-24G"},)
    attempt = reopened.attempt(job.id, 1)
    assert attempt.observed_peak_bytes == (900, 950) and attempt.predicted_device_bytes == 1000
    assert [line for _, _, line in reopened.logs(job.id)] == ["one", "two"]
    first = reopened.logs(job.id)[0][0]
    assert [line for _, _, line in reopened.logs(job.id, after=first)] == ["two"]
    assert reopened.calibration() == {("llama", "A10G-24G"): (1.25, 2)}
    assert reopened.count_by_state()[JobState.PLACED] == 1
    reopened.transition(job.id, JobState.SUCCEEDED, now=20.0, finished_at=20.0)
    with pytest.raises(InvalidTransitionError, match="terminal"):
        reopened.transition(job.id, JobState.PLANNING, now=21.0)
    with pytest.raises(UnknownJobError, match="frenzy jobs"):
        reopened.get_job("j-nope")
    with pytest.raises(ValueError, match="transition"):
        reopened.update_job(job.id, now=22.0, state="queued")
    reopened.close()


def test_sqlite_store_state_machine_and_restart(url):
    exercise_store(url)


def test_sqlite_uses_wal(url):
    store = SqlJobStore(url)
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


@pytest.mark.parametrize("make", ["text", "folder", "fifo"])
def test_a_url_naming_a_file_that_is_no_store_leaves_it_untouched(tmp_path, make):
    """`--db-url sqlite:////etc/passwd` once narrowed /etc/passwd to 0600 before SQLite said it was not
    a database: now nothing but a SQLite file (or a new one) is opened, chmod-ed or written."""
    import os
    import stat

    import sqlalchemy as sa

    path = tmp_path / "not-a-store"
    {"text": lambda: path.write_text("root:x:0:0:root:/root:/bin/bash\n"), "folder": path.mkdir,
     "fifo": lambda: os.mkfifo(path)}[make]()
    path.chmod(0o755 if make == "folder" else 0o644)
    before = (stat.S_IMODE(path.stat().st_mode), path.read_text() if make == "text" else None)
    with pytest.raises(sa.exc.ArgumentError, match="sqlite:///PATH"):
        SqlJobStore(f"sqlite:///{path}")
    assert (stat.S_IMODE(path.stat().st_mode), path.read_text() if make == "text" else None) == before
    assert not (tmp_path / "not-a-store-wal").exists()


def test_an_empty_file_becomes_a_private_store(tmp_path):
    import stat

    path = tmp_path / "new.db"
    path.touch(mode=0o644)
    SqlJobStore(f"sqlite:///{path}").create_job(name="a", request={}, priority=0, now=1.0)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert SqlJobStore(f"sqlite:///{path}").list_jobs()[0].name == "a"  # a store now: opened again


def test_serve_and_token_commands_name_a_file_that_is_no_store(tmp_path):
    from typer.testing import CliRunner

    from frenzy.cli.main import app

    path = tmp_path / "passwd"
    path.write_text("root:x:0:0:root:/root:/bin/bash\n")
    path.chmod(0o644)
    for args in (["serve", "--db-url", f"sqlite:///{path}"], ["token", "list", "--db-url", f"sqlite:///{path}"]):
        out = CliRunner().invoke(app, args)
        assert out.exit_code != 0 and "cannot open the job store" in out.output and "not a SQLite database" in \
            out.output and "Traceback" not in out.output and "internal error" not in out.output, out.output
    assert path.stat().st_mode & 0o777 == 0o644

"""A job's data read at submission in a child process whose memory and time the operator bounds.

What a data file becomes in memory is not bounded by its size on disk: a 4 KB parquet file whose
dictionary page holds one 100 MB string used by 20 rows is 2 GB of rows; a 39 MB file of tiny JSON
lines is over 1 GB of Python objects; a 400 KB JSON line nested 200,000 deep overflows the stack of
Arrow's parser and kills the process that reads it. So the read runs in a child process with an
address-space limit (RLIMIT_AS, counted from what the child already maps when it starts) and a
wall-clock limit. A child that runs out of memory, crashes or overruns is an InvalidDataError (a 422)
that says which limit and how to change it; the server itself never holds the rows.

Children are forked from a forkserver: one clean single-threaded process started on first use with
the data modules imported. A fork from it costs milliseconds, and none of the server's threads (Ray's,
the store's, uvicorn's) or the locks they hold are copied into a child.
"""

from __future__ import annotations

import math
import multiprocessing
import multiprocessing.forkserver
import os
import pickle
import resource
import signal
import sys
import threading
import traceback
from dataclasses import dataclass
from typing import Callable, TypeVar

from frenzy.core.errors import UnknownNameError
from frenzy.data.errors import InvalidDataError
from frenzy.data.files import offline

T = TypeVar("T")
DEFAULT_CHECK_MEMORY_BYTES = 2 << 30  # a data check's own memory, beyond the modules it starts with
DEFAULT_CHECK_SECONDS = 300.0  # tokenising a large file takes minutes on one core; more is a runaway
ORPHAN_GRACE_S = 5  # how long a check outlives its limit when the server died before killing it
MAX_CHECK_SECONDS = 86_400.0  # a day: beyond it a submission's answer is of no use to its client
_PRELOAD = ["frenzy.control.data_check", "datasets"]
_START = threading.Lock()


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckLimits:
    """memory_bytes: address space a data check may add to what it starts with; seconds: its wall time."""
    memory_bytes: int = DEFAULT_CHECK_MEMORY_BYTES
    seconds: float = DEFAULT_CHECK_SECONDS

    def __post_init__(self) -> None:
        if isinstance(self.memory_bytes, bool) or not isinstance(self.memory_bytes, int) or self.memory_bytes < 1:
            raise ValueError(f"a data check's memory must be a positive number of bytes, got {self.memory_bytes!r}")
        if isinstance(self.seconds, bool) or not isinstance(self.seconds, (int, float)) \
                or not 0 < self.seconds <= MAX_CHECK_SECONDS:
            raise ValueError(f"a data check's time must be a number of seconds in (0, {MAX_CHECK_SECONDS:g}], "
                             f"got {self.seconds!r}")

    def out_of_memory(self) -> InvalidDataError:
        return InvalidDataError(
            f"reading this data needs more than the {self.memory_bytes / 2**30:.2f} GiB of memory this server gives "
            "a data check (rows expand in memory: compressed or repeated values, many tiny rows); pass a smaller "
            "or plainer file, or ask the operator to raise `frenzy serve --max-check-memory-bytes`")

    def too_slow(self) -> InvalidDataError:
        return InvalidDataError(
            f"reading this data took over the {self.seconds:g} s this server gives a data check; pass a smaller "
            "file, or ask the operator to raise `frenzy serve --max-check-seconds`")


def _context():
    context = multiprocessing.get_context("forkserver")
    with _START:
        offline()  # the forkserver imports `datasets`: it must see the offline switches first
        context.set_forkserver_preload(_PRELOAD)
    return context


def start_data_checks() -> None:
    """Start the forkserver now (it imports the data modules in the background), not at the first check."""
    _context()
    multiprocessing.forkserver.ensure_running()


def run_limited(call: Callable[..., T], *args, limits: CheckLimits) -> T:
    """call(*args) in a child process under `limits`; its result, or the exception it raised (a
    MemoryError anywhere in it becomes limits.out_of_memory())."""
    context = _context()
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(sender, call, args, limits, dict(os.environ)), daemon=True,
                            name="frenzy-data-check")
    child.start()
    sender.close()
    try:
        if not receiver.poll(limits.seconds):
            raise limits.too_slow()
        try:
            status, value = receiver.recv()
        except (EOFError, OSError):  # it ended without an answer: killed or crashed
            child.join(5)
            raise _ended(child.exitcode, limits) from None
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        receiver.close()
    if status == "error":
        raise value
    return value


def _ended(exitcode: int | None, limits: CheckLimits) -> InvalidDataError:
    if exitcode is not None and exitcode < 0:
        how = f"was ended by {signal.Signals(-exitcode).name}"
    else:
        how = f"exited with status {exitcode}"
    if exitcode in (-signal.SIGKILL, -signal.SIGABRT):  # the kernel's OOM killer, or a failed allocation in C++
        return limits.out_of_memory()
    return InvalidDataError(f"the process reading this data {how} before it finished: the file is malformed in a "
                            "way its format's reader cannot handle (e.g. nesting hundreds of thousands deep); "
                            "check the file or convert it to plain JSON lines")


def _child(sender, call, args, limits: CheckLimits, environ: dict) -> None:
    os.environ.clear()
    os.environ.update(environ)  # the server's environment now, not the forkserver's at its start
    _limit_address_space(limits.memory_bytes)
    # The server kills a check at its limit; should the server itself be killed first, SIGALRM's
    # default action ends the check soon after, so no orphan reads on (the forkserver then exits too).
    signal.alarm(math.ceil(limits.seconds) + ORPHAN_GRACE_S)
    try:
        answer = ("ok", call(*args))
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the server to be answered
        answer = ("error", _portable(exc, limits))
    sender.send(answer)
    sender.close()


def _limit_address_space(extra_bytes: int) -> None:
    start = _mapped_bytes()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = start + extra_bytes
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _mapped_bytes() -> int:
    """This process's mapped address space (VmSize): the modules, their arenas and thread stacks."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise OSError("no VmSize in /proc/self/status: data checks need Linux's /proc")


def _portable(exc: BaseException, limits: CheckLimits) -> BaseException:
    """The exception as the server should raise it: out of memory as the limit's error, a refusal
    (a ValueError, InvalidDataError among them, or an unknown name: the API answers both with a 422)
    as raised, and anything else (a reader's own bug on an odd file) as an InvalidDataError quoting
    it, with its traceback printed here, since a check's failure is about the file it read, never a
    500."""
    seen, cause = set(), exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, MemoryError):
            return limits.out_of_memory()
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    if isinstance(exc, (ValueError, UnknownNameError)):
        try:
            pickle.loads(pickle.dumps(exc))
            return exc
        except Exception:  # noqa: BLE001 - an error holding an unpicklable value
            return InvalidDataError(str(exc))
    traceback.print_exception(exc, file=sys.stderr)
    return InvalidDataError(f"the reader of this data failed ({type(exc).__name__}: {exc}); the file is malformed "
                            "in a way its format's reader does not report; check the file or convert it to plain "
                            "JSON lines")

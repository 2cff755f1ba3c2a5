"""Work two threads must not do at once: transformers' first import and profiling a family without a
formula. Checked in fresh processes, where transformers is not imported yet: before the lock, two
threads' first `from transformers import ...` raised ImportError in one of them in most runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from frenzy.core.one_at_a_time import ProfilerBusy, profiler_turn

REPO = Path(__file__).resolve().parents[3]

# Distinct configs of a family without a formula, profiled from threads of one fresh process.
CONCURRENT_PROFILES = """
import json, sys, threading
from frenzy.core.generic import generic_arch, structure_of
from frenzy.core.one_at_a_time import ProfilerBusy
from frenzy.core.training import TrainingConfig
from frenzy.memory.profiled import activation_profile

def config(i):
    return {"model_type": "arcee", "architectures": ["ArceeForCausalLM"], "hidden_size": 64 * (i + 1),
            "intermediate_size": 96 * (i + 1), "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "vocab_size": 512 + i, "max_position_embeddings": 256}

outcomes = {}
def profile(i):
    try:
        arch = generic_arch(config(i), f"m{i}")
        activation_profile(arch, TrainingConfig(), 64)
        outcomes[i] = structure_of(config(i))[0]["hidden_size"]
    except ProfilerBusy:
        outcomes[i] = "busy"
    except Exception as exc:
        outcomes[i] = f"{type(exc).__name__}: {exc}"
threads = [threading.Thread(target=profile, args=(i,)) for i in range(int(sys.argv[1]))]
[t.start() for t in threads]
[t.join() for t in threads]
print(json.dumps(outcomes))
"""


def _profile_in_threads(tmp_path: Path, threads: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "FRENZY_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", CONCURRENT_PROFILES, str(threads)], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return {int(k): v for k, v in json.loads(done.stdout.splitlines()[-1]).items()}


def test_threads_profiling_new_families_at_once_each_get_their_own_model_or_a_retry(tmp_path):
    outcomes = _profile_in_threads(tmp_path, threads=8)
    # One profiles, four wait: at least five finish; the rest are told to retry, none fails.
    finished = {i: v for i, v in outcomes.items() if v != "busy"}
    assert finished == {i: 64 * (i + 1) for i in finished}, outcomes
    assert len(finished) >= 5, outcomes


def test_the_line_refuses_at_once_when_full_and_admits_again_when_free():
    holding, release = threading.Event(), threading.Event()
    waiting_done = []

    def hold():
        with profiler_turn(waiting=1):
            holding.set()
            release.wait(30)

    def wait_in_line():
        with profiler_turn(waiting=1):
            waiting_done.append(True)

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(30)
    waiter = threading.Thread(target=wait_in_line)
    waiter.start()
    deadline = time.monotonic() + 30
    while not _someone_waits():
        assert time.monotonic() < deadline, "the second caller never started waiting"
        time.sleep(0.01)
    with pytest.raises(ProfilerBusy, match="retry"):
        with profiler_turn(waiting=1):
            pass
    release.set()
    holder.join(30)
    waiter.join(30)
    assert waiting_done == [True]
    with profiler_turn(waiting=0):  # free again: no line at all is needed
        pass


def _someone_waits() -> bool:
    from frenzy.core import one_at_a_time

    return one_at_a_time._in_line >= 2

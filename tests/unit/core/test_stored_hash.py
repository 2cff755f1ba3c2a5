"""Records that store their hash (frenzy.core.hashing) stay usable as keys in another process.

str hashes are salted per process, so the check runs two interpreters with different PYTHONHASHSEED:
one pickles a job spec (its model and training settings inside), the other loads it and compares it,
as a key, with an equal spec it builds itself.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys

BUILD = """
from frenzy.core.hf_config import load_model
from frenzy.core.job import JobSpec
from frenzy.core.training import TrainingConfig, Method
spec = JobSpec(model=load_model("meta-llama/Llama-2-7b-hf"), training=TrainingConfig(method=Method.LORA),
               seq_len=2048, global_batch=8, steps=100)
hash(spec)  # stores the job spec's own hash too
"""

DUMP = BUILD + """
import base64, pickle, sys
sys.stdout.write(base64.b64encode(pickle.dumps(spec)).decode())
"""

LOAD = BUILD + """
import base64, pickle, sys
loaded = pickle.loads(base64.b64decode(sys.stdin.read()))
keys = {spec: "spec", spec.model: "model", spec.training: "training"}
print(loaded == spec, keys.get(loaded), keys.get(loaded.model), keys.get(loaded.training))
"""


def _python(code: str, seed: str, stdin: str = "") -> str:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run([sys.executable, "-c", code], input=stdin, capture_output=True, text=True, env=env,
                          timeout=120, check=True)
    return done.stdout


def test_a_job_spec_pickled_in_one_process_is_found_as_a_key_in_another():
    pickled = _python(DUMP, "1")
    assert base64.b64decode(pickled)  # something came across
    assert _python(LOAD, "2", pickled).split() == ["True", "spec", "model", "training"]

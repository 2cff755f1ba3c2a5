"""`frenzy` for scripts: --json on every command (one JSON document on stdout), errors as
{"error", "hint"} with a non-zero exit, one clean line without --json, and piped output that is
never cut. The client commands talk to the real app, store and loop on a loopback port."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from frenzy import __version__
from frenzy.cli.main import app
from frenzy.core import catalog

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
NO_SERVER = "http://127.0.0.1:9"
runner = CliRunner()


def run(*args, env=None):
    return runner.invoke(app, [str(a) for a in args], env=env, prog_name="frenzy")


def answer(*args, env=None):
    """The JSON document a successful `--json` command prints on stdout (and nothing else there)."""
    result = run(*args, "--json", env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def json_error(*args, code=2):
    """The error object of a failing `--json` command: the only thing on stdout, non-zero exit."""
    result = run(*args, "--json")
    assert result.exit_code == code, result.output
    out = json.loads(result.stdout)
    assert set(out) >= {"error", "hint"} and out["error"] and "Traceback" not in result.output, out
    return out


def one_line_error(*args, code=2):
    result = run(*args)
    assert result.exit_code == code, result.output
    assert result.stdout == "" and "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


# ---- offline commands -----------------------------------------------------------------------------

def test_models_filters_by_a_word_in_the_name_or_family():
    expected = [n for n in catalog.model_names()
                if "llama" in n.lower() or "llama" in str(catalog.model_config(n).get("model_type")).lower()]
    rows = answer("models", "LLaMA")["models"]
    assert [r["name"] for r in rows] == expected and len(expected) > 5
    assert all(set(r) >= {"family", "params", "layers", "hidden_size", "heads", "kv_heads", "vocab_size"}
               for r in rows)
    gpt2 = answer("models", "gpt2")["models"]
    assert [r["params"] for r in gpt2 if r["name"] == "openai-community/gpt2"] == [124_439_808]  # GPT-2 small, tied
    assert "no bundled model" in json_error("models", "no-such-family")["error"]


def test_gpus_json_lists_the_catalog_in_bytes():
    gpus = {g["name"]: g for g in answer("gpus")["gpus"]}
    assert set(gpus) == set(catalog.gpu_types())
    rows = yaml.safe_load((ROOT / "src/frenzy/core/catalog/gpus.yaml").read_text())["gpus"]
    assert {r["name"]: r["memory_bytes"] for r in rows} == {n: g["memory_bytes"] for n, g in gpus.items()}


def test_version():
    result = run("--version")
    assert result.exit_code == 0 and result.stdout.strip() == f"frenzy {__version__}"
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)


@pytest.mark.parametrize("args, says", [
    (["memory", "llama-9-7b"], "Did you mean"),
    (["memory", "gpt2", "--precision", "fp8"], "'fp8' is not one of"),
    (["memory", "gpt2", "--zero", "4"], "'4' is not one of"),
    (["memory", "gpt2", "--seq", "many"], "--seq"),
    (["memory"], "Missing argument"),
    (["memory", "gpt2", "--no-such-option"], "No such option"),
    (["plan", "gpt2", "--objective", "speed"], "'speed' is not one of"),
    (["plan", "gpt2", "--top", "0"], "--top must be >= 1"),
    (["plan", "gpt2", "--seq", "1024", "--gpus", "H1000"], "unknown GPU type"),
    (["no-such-command"], "No such command"),
    (["jobs", "--state", "sleeping"], "'sleeping' is not one of"),
])
def test_errors_are_json_with_a_hint_or_one_line(args, says):
    out = json_error(*args)
    assert says in out["error"] and out["hint"], out
    assert says in one_line_error(*args)


def test_choices_are_shown_and_completed():
    help_text = run("memory", "--help", env={"COLUMNS": "200"}).stdout
    for shown in ("fp32|fp16-mixed|bf16-mixed|bf16", "0|1|2|3", "none|attention|selective|full", "flash|sdpa|eager"):
        assert shown in help_text
    completed = run(env={"_FRENZY_COMPLETE": "complete_bash", "COMP_WORDS": "frenzy memory gpt2 --precision ",
                         "COMP_CWORD": "4"})
    assert completed.stdout.split() == ["fp32", "fp16-mixed", "bf16-mixed", "bf16"]
    # the install / show options are offered (what they print depends on detecting the user's shell)
    assert "--install-completion" in run("--help", env={"COLUMNS": "200"}).stdout


# ---- piped output ---------------------------------------------------------------------------------

def _plan_rows(output: str) -> list[list[str]]:
    return [[c.strip() for c in line.split("│")[1:-1]] for line in output.splitlines()
            if line.startswith("│") and re.match(r"│\s*\d+\s*│", line)]


def test_piped_plan_table_is_whole_and_costs_have_cents():
    args = ["plan", "llama-3.1-8b", "--global-batch", "32", "--steps", "20", "--top", "500"]
    plans = answer(*args)["plans"]
    result = run(*args)  # CliRunner's stdout is not a terminal, as a pipe
    assert result.exit_code == 0 and "…" not in result.stdout
    rows = _plan_rows(result.stdout)
    assert len(rows) == len(plans)
    header = next(line for line in result.stdout.splitlines() if "GPU type" in line)
    cost_col = [c.strip() for c in header.split("┃")[1:-1]].index("cost $")
    # the table groups plans by GPU type; the JSON keeps the ranking: the same rows either way
    shown = sorted((row[1], row[cost_col]) for row in rows)
    assert shown == sorted((p["gpu_type"], f"{p['predicted_cost_usd']:.2f}") for p in plans)  # cents
    assert any(0 < p["predicted_cost_usd"] < 1 for p in plans)  # 20 steps: cents only (was printed as 0)


def test_piped_output_honours_columns_and_is_otherwise_uncut():
    names = [r["name"] for r in answer("models")["models"]]
    wide = run("models").stdout
    assert "…" not in wide and all(n in wide for n in names)  # the longest names are 40 characters
    narrow = run("models", env={"COLUMNS": "60"}).stdout
    assert max(len(line) for line in narrow.splitlines()) <= 60


# ---- job files --------------------------------------------------------------------------------------

BAD_FILES = [
    ("empty.yaml", "", "is empty"),
    ("list.yaml", "- model: gpt2\n- steps: 3\n", "is a list"),
    ("broken.yaml", "model: [gpt2,\n", "is not valid YAML"),
    ("indent.yaml", "model: gpt2\n  steps: 3\n", "is not valid YAML"),
    ("alias.yaml", "a: &a [x, x]\nb: [*a, *a]\n", "aliases"),
    ("date.yaml", "model: gpt2\nsteps: 2024-01-01\n", "JSON cannot carry"),
    ("nan.yaml", "model: gpt2\nlearning_rate: .nan\n", "JSON cannot carry"),
    ("binary.bin", b"\xff\xfe\x00m", "is not UTF-8"),
]


@pytest.mark.parametrize("name, content, says", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_a_bad_job_file_is_one_line_or_one_json_error(tmp_path, name, content, says):
    spec = tmp_path / name
    spec.write_bytes(content if isinstance(content, bytes) else content.encode())
    assert says in one_line_error("submit", spec, "--url", NO_SERVER)
    assert says in json_error("submit", spec, "--url", NO_SERVER)["error"]


def test_a_missing_file_or_a_folder_is_one_line(tmp_path):
    assert "does not exist" in one_line_error("submit", tmp_path / "nope.yaml", "--url", NO_SERVER)
    assert "is a folder" in json_error("submit", tmp_path, "--url", NO_SERVER)["error"]


@pytest.mark.parametrize("content, says", [
    ("model: gpt2\nsteps: 3\ngpus: 8\n", "unknown field 'gpus'"),
    ("model: gpt2\nsteps: three\n", "steps"),
    ("model: gpt2\nsteps: 3\nglobal_batch: -4\n", "global_batch"),
    ("model: gpt2\nsteps: 100000000000\n", "steps"),
    ("model: gpt2\nsteps: 3\nlimits: 7\n", "limits"),
    ("model: [1, 2]\nsteps: 3\n", "model"),
    ("model: " + "x" * 5000 + "\nsteps: 3\n", "model"),
    ("model: gpt2\nsteps: 3\ndataset: " + "d" * 5000 + ".jsonl\n", "dataset"),
    ('model: "a\\0b"\nsteps: 3\n', "model"),
], ids=["unknown-field", "wrong-type", "negative", "out-of-bounds", "limits-not-a-mapping", "model-a-list",
        "model-name-too-long", "path-too-long", "nul-in-a-name"])
def test_a_job_file_the_server_refuses_is_one_line_or_one_json_error(server, tmp_path, content, says):
    spec = tmp_path / "job.yaml"
    spec.write_text(content)
    assert says in one_line_error("submit", spec, "--url", server)
    out = json_error("submit", spec, "--url", server)
    assert says in out["error"] and out["status"] == 422


# ---- the client commands on the loopback server ------------------------------------------------------

def test_client_commands_answer_in_json(server):
    created = answer("submit", EXAMPLES / "tiny-llama.yaml", "--url", server)
    job_id, best = created["id"], created["plans"][0]
    assert best["num_gpus"] >= 1 and best["gpu_type"] in catalog.gpu_types()
    assert job_id in [j["id"] for j in answer("jobs", "--url", server)["jobs"]]
    status = answer("status", job_id, "--url", server)
    assert status["id"] == job_id and status["state"] in ("queued", "planning", "placed", "running")
    cluster = answer("cluster", "--url", server)
    assert sum(n["total_gpus"] for n in cluster["nodes"]) == 12 * 8  # bench/control_loop's cluster
    logs = run("logs", job_id, "--url", server, "--json")
    assert logs.exit_code == 0
    lines = [json.loads(line) for line in logs.stdout.splitlines()]  # JSON Lines
    assert lines and all(set(ln) == {"seq", "ts", "line"} for ln in lines)
    assert answer("artifacts", job_id, "--url", server)["files"] == []
    for args in (["jobs"], ["status", job_id], ["cluster"], ["submit", EXAMPLES / "tiny-llama.yaml"]):
        shown = run(*args, "--url", server)  # the tables, piped: whole
        assert shown.exit_code == 0 and "…" not in shown.stdout, shown.output
    assert job_id in run("jobs", "--url", server).stdout
    assert answer("cancel", job_id, "--url", server)["id"] == job_id
    cancelled = answer("jobs", "--state", "cancelled", "--url", server)["jobs"]
    assert job_id in [j["id"] for j in cancelled] and {j["state"] for j in cancelled} == {"cancelled"}


def test_server_errors_are_json_with_the_http_status(server):
    out = json_error("status", "j-nope", "--url", server)
    assert out["status"] == 404
    assert json_error("jobs", "--url", NO_SERVER)["status"] == 0  # no answer: start the server or set FRENZY_URL
    assert "FRENZY_URL" in one_line_error("cluster", "--url", NO_SERVER)


def test_token_and_login_commands_answer_in_json(server, server_db, tmp_path, monkeypatch):
    monkeypatch.setenv("FRENZY_CREDENTIALS", str(tmp_path / "creds"))
    made = answer("token", "create", "--user", "dana", "--db-url", server_db)
    try:
        assert made["user"] == "dana" and made["admin"] is False and made["token"].split(".")[1] == made["id"]
        listed = answer("token", "list", "--db-url", server_db)["tokens"]
        assert [t["id"] for t in listed] == [made["id"]] and made["token"] not in json.dumps(listed)
        login = answer("login", "--token", made["token"], "--url", server)
        assert login["checked"] is True and login["accepted"] is True
        assert Path(login["credentials"]) == tmp_path / "creds"
        assert json_error("login", "--token", "frz.t-0.wrong", "--url", server)["status"] == 401
    finally:  # no active token: the loopback server is open again for the other tests
        assert answer("token", "revoke", made["id"], "--db-url", server_db) == {"revoked": made["id"]}
    assert "no active token" in json_error("token", "revoke", made["id"], "--db-url", server_db)["error"]
    offline = answer("login", "--token", made["token"], "--url", NO_SERVER)
    assert offline["checked"] is False and offline["accepted"] is None


def test_submit_wait_json_prints_the_ended_job_and_exits_by_its_state(server):
    """--wait --json: no live view, one document once the job has ended (here: cancelled meanwhile)."""
    import threading
    import time

    from frenzy.cli.client import Client

    client = Client(server)
    before = {j["id"] for j in client.jobs()}
    done = {}
    waiter = threading.Thread(target=lambda: done.update(result=run(
        "submit", EXAMPLES / "tiny-llama.yaml", "--url", server, "--wait", "--json")))
    waiter.start()
    deadline = time.monotonic() + 60
    while not (new := {j["id"] for j in client.jobs()} - before) and time.monotonic() < deadline:
        time.sleep(0.1)
    (job_id,) = new
    client.cancel(job_id)
    waiter.join(60)
    result = done["result"]
    assert result.exit_code == 1, result.output  # it did not succeed
    job = json.loads(result.stdout)
    assert job["id"] == job_id and job["state"] == "cancelled"


def test_an_unexpected_error_is_one_line_and_the_debug_variable_shows_the_traceback(monkeypatch):
    from frenzy.cli import main

    def broken(*_args, **_kwargs):
        raise RuntimeError("the catalog broke")

    monkeypatch.setattr(main, "load_model", broken)  # a bug in a command, as no input can cause one
    line = one_line_error("memory", "gpt2", code=1)
    assert "internal error: RuntimeError: the catalog broke" in line and "FRENZY_DEBUG=1" in line
    assert json_error("memory", "gpt2", code=1)["hint"].startswith("set FRENZY_DEBUG=1")
    debug = run("memory", "gpt2", env={"FRENZY_DEBUG": "1"})
    assert isinstance(debug.exception, RuntimeError)


@pytest.mark.parametrize("message, hint", [
    ("no GPU type fits 61.2 GiB per GPU; allow tensor parallelism or LoRA", "allow tensor parallelism or LoRA"),
    ("unknown model 'llama-9-7b'. Did you mean: llama-2-7b?", "Did you mean: llama-2-7b?"),
    ("unknown policy 'x'. Known: fifo, frenzy.", "Known: fifo, frenzy."),
    ("--top must be >= 1, got 0", ""),
    # a library's error quoted in parentheses keeps its own "; " (before: the hint began inside it)
    ("this axk1 model could not be traced (RuntimeError: shape mismatch; but expected [1, 4]); plan it with a "
     "config of a family Frenzy has formulas for", "plan it with a config of a family Frenzy has formulas for"),
])
def test_the_hint_is_the_part_of_a_message_that_says_what_to_change(message, hint):
    from frenzy.cli.output import hint_of

    assert hint_of(message) == hint


def test_a_group_alone_shows_its_help_not_an_error():
    for args in ([], ["token"]):
        result = run(*args)
        assert result.exit_code == 2 and "Usage:" in result.stdout and "error" not in result.stderr


@pytest.mark.parametrize("url, says", [("nonsense", "Could not parse"),
                                       ("postgresql://u:secret@127.0.0.1:1/x", "Connection refused")])
def test_a_job_store_that_cannot_be_opened_is_one_line(url, says):
    line = one_line_error("token", "list", "--db-url", url)
    assert "cannot open the job store" in line and says in line and "secret" not in line
    assert "FRENZY_DB_URL" in json_error("token", "list", "--db-url", url)["hint"]


def test_every_command_but_serve_takes_json():
    """A new command takes --json too (serve runs until stopped; simulate's --json names a file)."""
    import typer.main

    def leaves(command, path=()):
        for name, sub in getattr(command, "commands", {}).items():
            yield from leaves(sub, (*path, name))
        if not hasattr(command, "commands"):
            yield " ".join(path), command

    missing = [name for name, command in leaves(typer.main.get_command(app))
               if name not in ("serve", "simulate")
               and not any("--json" in p.opts and p.is_flag for p in command.params if hasattr(p, "opts"))]
    assert missing == []

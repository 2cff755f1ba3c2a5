"""Teams in the simulator: the teams file, the default derived from the trace's users, a team's
quota as a cluster of its own, and a run under quotas that the audit finds free of violations
(while the same audit over a policy that ignores quotas finds them)."""

import pytest

from dataclasses import replace

from frenzy.core.errors import UnknownNameError
from frenzy.sched import get_policy
from frenzy.sim.cluster import load_cluster
from frenzy.sim.engine import SimConfig, Simulator
from frenzy.sim.teams import QuotaAudit, TeamsSpec, derive_teams, load_teams, quota_cluster, quota_policy
from tests.sim.conftest import small_jobs


def test_teams_file_is_read_with_canonical_gpu_names(tmp_path):
    path = tmp_path / "teams.yaml"
    path.write_text("teams:\n  red:\n    quota: {a100-40g: 8, T4: 4}\n    users: [u0, u1]\n"
                    "  blue:\n    quota: {T4-16G: 4}\n    users: [u2]\n")
    spec = load_teams(path)
    assert spec.quotas == {"red": {"A100-SXM-40G": 8, "T4-16G": 4}, "blue": {"T4-16G": 4}}
    assert spec.members == {"u0": "red", "u1": "red", "u2": "blue"}


@pytest.mark.parametrize("text, words", [
    ("teams:\n  red:\n    quota: {A10O: 8}\n", ["team red", "unknown GPU type 'A10O'", "Did you mean"]),
    ("teams:\n  red:\n    quota: {T4: -1}\n", ["team red", "whole number"]),
    ("teams:\n  a:\n    users: [u]\n  b:\n    users: [u]\n", ["user u is in teams a and b"]),
    ("nothing: 1\n", ["expected `teams:`"]),
    # before pydantic read the file: a string of users was split into letters, a mapping became a user's
    # name, and YAML that does not parse was an internal error
    ("teams:\n  red:\n    users: abc\n", ["teams.red.users: input should be a valid list"]),
    ("teams:\n  red:\n    users: [{x: 1}]\n", ["teams.red.users.0"]),
    ("teams:\n  red:\n    quota: {T4: 4}\n    user: [u]\n", ["teams.red.user: extra inputs are not permitted"]),
    ("teams: [\n", ["cannot read the teams file"]),
    ("teams:\n  red:\n    users: [1.5e+3]\n", ["teams.red.users.0: input should be a valid string"]),  # YAML: 1500.0
])
def test_a_bad_teams_file_says_what_to_change(tmp_path, text, words):
    path = tmp_path / "teams.yaml"
    path.write_text(text)
    with pytest.raises((ValueError, UnknownNameError)) as info:
        load_teams(path)
    for word in words:
        assert word in str(info.value)


def test_derived_teams_split_every_type_equally_rounding_down():
    # sia-64: 24 T4, 24 RTX 2080 Ti, 16 A100; small_jobs has users u0, u1, u2.
    spec = derive_teams(small_jobs(), load_cluster("sia-64"))
    assert spec.quotas == {u: {"T4-16G": 8, "RTX-2080Ti-11G": 8, "A100-SXM-40G": 5} for u in ("u0", "u1", "u2")}
    assert spec.members == {"u0": "u0", "u1": "u1", "u2": "u2"}


def test_a_quota_becomes_whole_nodes_then_the_rest():
    # sia-64's A100 nodes hold 8 each, its T4 nodes 4 each.
    part = quota_cluster(load_cluster("sia-64"), {"A100-SXM-40G": 12, "T4-16G": 8}, "part")
    assert [(g.gpu_type, g.gpus_per_node, g.count) for g in part.groups] == [
        ("T4-16G", 4, 2), ("A100-SXM-40G", 8, 1), ("A100-SXM-40G", 4, 1)]
    assert part.gpus_by_type() == {"A100-SXM-40G": 12, "T4-16G": 8}
    assert quota_cluster(load_cluster("sia-64"), {}, "none") is None


def test_a_run_under_quotas_has_no_violation_and_every_job_ends():
    cluster = load_cluster("testbed")  # 8 A100-80G, 8 A10-24G, 8 T4
    # The default pool's jobs (user u2) come first and fill the cluster; the teams' come a minute later.
    jobs = [replace(j, submit_time_s=0.0 if j.user == "u2" else 60.0 + j.submit_time_s / 100) for j in small_jobs(30)]
    spec = TeamsSpec(quotas={"a": {"A100-SXM-80G": 8}, "b": {"A10-24G": 8, "T4-16G": 8}},
                     members={"u0": "a", "u1": "b"})  # u2 is in no team: the default pool
    audited = quota_policy(get_policy("frenzy"), spec, jobs)
    result = Simulator(cluster, audited, jobs, SimConfig(seed=1)).run()
    assert audited.calls > 0 and audited.violations == 0
    assert all(j["jct_s"] is not None for j in result.jobs)
    # The audit is not blind: over plain HAS (no quotas) the same teams are kept from their quotas.
    plain = QuotaAudit(get_policy("frenzy"), spec.teams_for(jobs))
    Simulator(cluster, plain, jobs, SimConfig(seed=1)).run()
    assert plain.violations > 0


def test_frenzy_simulate_with_teams(trace_csv, tmp_path):
    from typer.testing import CliRunner

    from frenzy.cli.main import app

    args = ["simulate", "--trace", str(trace_csv), "--cluster", "testbed", "--policy", "frenzy", "--max-jobs", "12"]
    result = CliRunner().invoke(app, [*args, "--teams", "users"])
    assert result.exit_code == 0, result.output
    assert "frenzy under team quotas: 0 quota violation(s)" in result.output
    bad = tmp_path / "teams.yaml"
    bad.write_text("teams:\n  red:\n    quota: {H10O: 1}\n")
    result = CliRunner().invoke(app, [*args, "--teams", str(bad)])
    assert result.exit_code == 2 and "Did you mean" in result.output and "Traceback" not in result.output

"""Trace formats, the LLM workload mapping, and the built-in clusters."""

import csv
import re

import pytest

from frenzy.core import catalog
from frenzy.sim import alibaba
from frenzy.sim.cluster import builtin_cluster_names, load_cluster, parse_cluster
from frenzy.sim.trace import detect_format, read_frenzy_csv, write_frenzy_csv
from frenzy.sim.workload import REFERENCE_GPU, load_trace, to_llm_job
from frenzy.sim.trace import RawJob
from frenzy.sched.configs import config_choice
from frenzy.core.hf_config import load_model
from frenzy.core.job import JobSpec
from frenzy.core.training import Method, Precision, TrainingConfig
from tests.sim.conftest import small_jobs


def test_canonical_csv_round_trip(trace_csv, tmp_path):
    assert detect_format(trace_csv) == "frenzy"
    jobs = read_frenzy_csv(trace_csv)
    assert jobs == small_jobs()
    with open(trace_csv) as f:
        assert next(csv.reader(f)) == ["job_id", "submit_time_s", "model", "global_batch", "seq_len", "steps",
                                       "precision", "method", "requested_gpus", "requested_gpu_type", "user"]
    again = tmp_path / "again.csv"
    write_frenzy_csv(jobs, again)
    assert read_frenzy_csv(again) == jobs


def test_bad_canonical_rows_say_what_to_fix(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("job_id,submit_time_s,model\nx,0,gpt2\n")
    with pytest.raises(ValueError, match="missing columns"):
        read_frenzy_csv(path)


def test_mapping_is_seeded_and_matches_the_trace_duration():
    raw = RawJob(job_id="abc", submit_time_s=10.0, duration_s=7200.0, num_gpus=4)
    job = to_llm_job(raw, seed=1)
    assert job == to_llm_job(raw, seed=1)
    assert job.requested_gpus == 4 and job.requested_gpu_type is None
    spec = JobSpec(model=load_model(job.model), training=TrainingConfig(precision=Precision(job.precision),
                   method=Method(job.method)), seq_len=job.seq_len, global_batch=job.global_batch)
    ref = catalog.gpu_type(REFERENCE_GPU)
    step = config_choice(spec, REFERENCE_GPU, 4, ref.gpus_per_node).step_time_s
    assert job.steps * step == pytest.approx(7200.0, abs=step)  # as long as in the trace, on its hardware
    others = {to_llm_job(raw, seed=s).model for s in range(12)}
    assert len(others) > 1  # the seed matters


@pytest.mark.parametrize("path, fmt", [("elasticflow/raw/cluster10.csv", "elasticflow"),
                                       ("elasticflow/ef/cluster10.csv", "elasticflow"),
                                       ("philly/philly.csv", "philly")])
def test_shared_trace_loaders(shared_traces, path, fmt):
    assert detect_format(shared_traces / path) == fmt
    jobs = load_trace(shared_traces / path, max_jobs=40, skip_jobs=5)
    assert len(jobs) == 40 and jobs[0].submit_time_s == 0
    assert all(b.submit_time_s >= a.submit_time_s for a, b in zip(jobs, jobs[1:]))
    assert all(j.requested_gpus and j.requested_gpus & (j.requested_gpus - 1) == 0 for j in jobs)
    assert load_trace(shared_traces / path, max_jobs=40, skip_jobs=5) == jobs


def test_builtin_clusters():
    names = builtin_cluster_names()
    assert {"testbed", "sia-64", "alibaba-spot", "alibaba-openb", "synthetic-10k"} <= set(names)
    sia = load_cluster("sia-64")
    # Sia paper, section 6: 6 nodes x 4 T4, 3 x 8 RTX 2080 Ti, 2 x 8 A100-40GB
    assert [(g.gpu_type, g.gpus_per_node, g.count) for g in sia.groups] == [
        ("T4-16G", 4, 6), ("RTX-2080Ti-11G", 8, 3), ("A100-SXM-40G", 8, 2)]
    assert load_cluster("synthetic-10k").total_gpus == 10_000
    assert len(set(load_cluster("testbed").gpus_by_type())) == 3
    small = load_cluster("alibaba-openb@256")
    assert 200 <= small.total_gpus <= 320 and len(small.gpus_by_type()) >= 5


def test_cluster_yaml_errors_and_suggestions(tmp_path):
    with pytest.raises(ValueError, match="allowed"):
        parse_cluster({"nodes": [{"gpu_type": "T4", "gpus_per_node": 4, "count": 1, "gpus": 3}]})
    with pytest.raises(KeyError, match="Did you mean"):
        load_cluster("sia64")
    with pytest.raises(KeyError, match="Known: alibaba-openb, alibaba-spot, sia-64, synthetic-10k, testbed"):
        load_cluster("qqqqqq")
    path = tmp_path / "c.yaml"
    path.write_text(load_cluster("testbed").to_yaml())
    assert load_cluster(str(path)).gpus_by_type() == load_cluster("testbed").gpus_by_type()


def test_alibaba_yaml_matches_the_node_lists(shared_dir):
    for build, name, column in ((alibaba.openb_cluster, "alibaba-openb", "gpu"),
                                (alibaba.spot_cluster, "alibaba-spot", "gpu_capacity_num")):
        spec = build(shared_dir)
        csv_path = shared_dir / (alibaba.OPENB_CSV if "openb" in name else alibaba.SPOT_CSV)
        with open(csv_path) as f:
            total = sum(int(r[column]) for r in csv.DictReader(f))
        assert spec.total_gpus == total == load_cluster(name).total_gpus
        assert spec.gpus_by_type() == load_cluster(name).gpus_by_type()


def test_a_wrong_format_or_job_range_says_what_to_change(tmp_path):
    trace = tmp_path / "ef.csv"
    trace.write_text("job_id,num_gpu,submission_time,duration\na,2,0,3600\nb,1,60,600\nc,4,90,60\n")
    with pytest.raises(ValueError, match=r"not in the philly format: it lacks the columns \['num_gpus', 'timestamp'\]; "
                                         "its header matches the elasticflow format"):
        load_trace(trace, "philly")
    with pytest.raises(ValueError, match="unknown trace format 'csv'; choose one of: auto, frenzy, elasticflow"):
        load_trace(trace, "csv")
    for bad in ({"max_jobs": 0}, {"max_jobs": -2}, {"skip_jobs": -1}):  # slicing would take the wrong jobs
        with pytest.raises(ValueError, match="must be >="):
            load_trace(trace, **bad)
    kept = load_trace(trace, "elasticflow", max_jobs=1, skip_jobs=1)
    assert [(j.job_id, j.submit_time_s) for j in kept] == [("b", 0.0)]


@pytest.mark.parametrize("seed", [0, 1, 2**32 - 1, 2**32, 2**40])
def test_a_jobs_random_draws_are_those_of_numpy_seeded_with_the_seed_and_its_ids_checksum(seed):
    import zlib

    import numpy as np

    from frenzy.sim.workload import job_rng
    for job_id in ("0", "job-17", "a" * 300):
        expected = np.random.default_rng([seed, zlib.crc32(job_id.encode())])
        drawn = job_rng(seed, job_id)
        assert drawn.normal(0, 0.75) == expected.normal(0, 0.75)
        assert drawn.integers(1 << 30, size=8).tolist() == expected.integers(1 << 30, size=8).tolist()


@pytest.mark.parametrize("group, says", [
    ("gpus_per_node: 8.5, count: 2", "node group 1, gpus_per_node: input should be a valid integer"),
    ("gpus_per_node: 8, count: 2, inter_node_gbit_s: .nan", "node group 1, inter_node_gbit_s: input should be a finite"),
    ("gpus_per_node: 8, count: 2, host_memory_gib: .inf", "node group 1, host_memory_gib: input should be a finite"),
    ("gpus_per_node: 8, count: 0", "node group 1, count: input should be greater than or equal to 1"),
    ("gpus_per_node: 8, count: 2, stands_for: [1, 2]", "node group 1, stands_for: input should be a valid string"),
    ("gpus_per_node: 8, count: 125001", "has 1,000,008 GPUs; the simulator takes at most 1,000,000"),
])
def test_cluster_yaml_fields_are_checked_and_every_bad_one_named(tmp_path, group, says):
    # before, 8.5 GPUs per node ran, NaN and infinity failed as internal errors, and 10^8 nodes were built
    path = tmp_path / "c.yaml"
    path.write_text(f"name: c\nnodes:\n  - {{gpu_type: A100-SXM-80G, {group}}}\n")
    with pytest.raises(ValueError, match=re.escape(says)):
        load_cluster(str(path))


def test_a_cluster_yaml_that_is_not_yaml_or_asks_for_python_objects_is_a_value_error(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("nodes: !!python/object/apply:os.system ['echo x']\n")
    with pytest.raises(ValueError, match="is not valid YAML"):
        load_cluster(str(path))
    with pytest.raises(ValueError, match="simulator takes at most 1,000,000"):
        load_cluster("sia-64@99999999999")


def test_a_cluster_yaml_name_yaml_reads_as_an_int_is_still_that_name(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("name: 64\nnodes:\n  - {gpu_type: A100-SXM-80G, gpus_per_node: 8, count: 1, stands_for: 4090}\n")
    spec = load_cluster(str(path))
    assert spec.name == "64" and spec.groups[0].stands_for == "4090"

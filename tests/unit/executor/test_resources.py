"""Discovery from Ray node entries and fake-node specs (pure parsing; e2e runs them on Ray)."""

from __future__ import annotations

import pytest

from frenzy.core.units import GiB
from frenzy.executor.fake_cluster import parse_nodes
from frenzy.executor.resources import node_info, node_labels


def test_node_info_reads_gpu_type_resource_and_emulated_memory():
    entry = {"NodeID": "abc", "Alive": True, "Resources": {"CPU": 4.0, "gpu_type:A100-SXM-40G": 4.0},
             "Labels": node_labels("n1", "A100-SXM-40G", 3 * GiB)}
    info = node_info(entry)
    assert info.name == "n1" and info.gpus == 4 and info.gpu_type.name == "A100-SXM-40G"
    assert info.gpu_type.memory_bytes == 3 * GiB  # not the catalog's 40G: the card is emulated smaller


def test_head_without_gpus_is_not_a_gpu_node():
    assert node_info({"Resources": {"CPU": 2.0}, "Labels": {}}) is None


def test_two_gpu_types_on_one_node_is_refused():
    with pytest.raises(ValueError, match="exactly one"):
        node_info({"Resources": {"gpu_type:T4-16G": 1, "gpu_type:L4-24G": 1}, "Labels": {}})


def test_parse_fake_nodes_and_presets():
    nodes = parse_nodes("a10g:4:1.5GiB,A10G-24G:2,t4:1")
    assert [(n.name, n.gpu_type, n.gpus) for n in nodes] == [
        ("a10g-24g-0", "A10G-24G", 4), ("a10g-24g-1", "A10G-24G", 2), ("t4-16g-0", "T4-16G", 1)]
    assert nodes[0].memory_bytes == int(1.5 * GiB)
    assert len({n.gpu_type for n in parse_nodes("demo")}) == 3
    with pytest.raises(ValueError, match="TYPE:GPUS"):
        parse_nodes("A10G-24G")


def test_ray_start_command_from_nvml_name():
    from frenzy.executor.node_args import ray_start_command

    cmd = ray_start_command("10.0.0.1:6379", "NVIDIA H100 80GB HBM3", 8, 85520809984, "gpu-7")
    assert "gpu_type:H100-SXM-80G" in cmd and "--num-gpus=8" in cmd and "frenzy.io/node=gpu-7" in cmd
    assert "RAY_AUTH_MODE=token" in cmd and "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in cmd


def test_a_nodes_network_label_sets_its_inter_node_bandwidth():
    entry = {"NodeID": "abc", "Alive": True, "Resources": {"gpu_type:A100-SXM-40G": 8.0},
             "Labels": node_labels("n1", "A100-SXM-40G", 40 * GiB, inter_node_gbit_s=25)}
    assert node_info(entry).gpu_type.inter_node_bandwidth_bytes_s == 25e9 / 8
    unlabelled = {**entry, "Labels": node_labels("n1", "A100-SXM-40G", 40 * GiB)}
    assert node_info(unlabelled).gpu_type.inter_node_bandwidth_bytes_s == 200e9 / 8  # the catalog's NIC
    for bad in ("fast", "0", "-5", "inf"):
        broken = {**entry, "Labels": {**entry["Labels"], "frenzy.io/inter-node-gbit-s": bad}}
        with pytest.raises(ValueError, match="node n1: inter-node network .* must be a positive number of Gb/s"):
            node_info(broken)


def test_ray_start_command_carries_the_network_and_checks_it():
    from frenzy.executor.node_args import ray_start_command

    cmd = ray_start_command("10.0.0.1:6379", "NVIDIA A100-SXM4-40GB", 8, 42505273344, "gpu-1", inter_node_gbit_s=100)
    assert "frenzy.io/inter-node-gbit-s=100" in cmd
    with pytest.raises(ValueError, match="positive number of Gb/s"):
        ray_start_command("10.0.0.1:6379", "NVIDIA A100-SXM4-40GB", 8, 42505273344, "gpu-1", inter_node_gbit_s=-1)


def test_ray_node_args_rejects_a_bad_network_before_looking_for_gpus():
    from typer.testing import CliRunner

    from frenzy.cli.main import app

    result = CliRunner().invoke(app, ["ray-node-args", "--inter-node-gbit-s", "0"])
    assert result.exit_code == 2 and "must be a positive number of Gb/s" in result.output


def test_a_user_catalog_type_is_discovered_on_live_and_fake_nodes(tmp_path, monkeypatch):
    """The server's discovery and --fake-cluster run in the server process: both see the user's rows."""
    from frenzy.core import catalog

    path = tmp_path / "gpus.yaml"
    path.write_text("gpus:\n  - name: H20\n    price_per_gpu_hour_usd: 0.9\n"
                    "  - name: Acme-S1-80G\n    aliases: [\"Acme S1\"]\n    memory_bytes: 85899345920\n"
                    "    peak_flops: {bf16: 500.0e+12, fp16: 500.0e+12, tf32: 250.0e+12, fp32: 60.0e+12}\n"
                    "    hbm_bandwidth_bytes_s: 3.0e+12\n    intra_node_link: nvlink\n"
                    "    intra_node_bandwidth_bytes_s: 300.0e+9\n    gpus_per_node: 8\n    supports_bf16: true\n"
                    "    price_per_gpu_hour_usd: 1.25\n")
    monkeypatch.setenv(catalog.GPU_CATALOG_ENV, str(path))
    catalog.use_gpu_catalog(None)
    try:
        info = node_info({"Resources": {"gpu_type:Acme-S1-80G": 8.0}, "Labels": {"frenzy.io/node": "n1"},
                          "Alive": True})
        assert (info.gpu_type.name, info.gpu_type.memory_bytes, info.gpus) == ("Acme-S1-80G", 85899345920, 8)
        assert node_info({"Resources": {"gpu_type:H20-96G": 8.0}, "Labels": {}}).gpu_type.price_per_gpu_hour_usd == 0.9
        assert [n.gpu_type for n in parse_nodes("acme s1:2")] == ["Acme-S1-80G"]
    finally:
        monkeypatch.delenv(catalog.GPU_CATALOG_ENV)
        catalog.use_gpu_catalog(None)

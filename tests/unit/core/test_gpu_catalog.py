"""GPU catalogs a user adds (--gpu-catalog, FRENZY_GPU_CATALOG) and the bundled rows added with them.

Datasheet figures below are copied from the datasheets, not from gpus.yaml."""

import json
import textwrap

import pytest
from typer.testing import CliRunner

from frenzy.cli.main import app
from frenzy.core import catalog
from frenzy.core.errors import GpuCatalogError, UnknownNameError

runner = CliRunner()

NEW_TYPE = """
  - name: Acme-X1-64G
    aliases: [acme-x1, "Acme X1", 1234]
    memory_bytes: 68719476736
    peak_flops: {bf16: 400.0e+12, fp16: 400.0e+12, tf32: 200.0e+12, fp32: 50.0e+12}
    hbm_bandwidth_bytes_s: 3.0e+12
    intra_node_link: nvlink
    intra_node_bandwidth_bytes_s: 300.0e+9
    gpus_per_node: 8
    supports_bf16: true
    price_per_gpu_hour_usd: 1.25
"""


@pytest.fixture(autouse=True)
def bundled_catalog(monkeypatch):
    """Each test starts and ends on the bundled catalog alone."""
    monkeypatch.delenv(catalog.GPU_CATALOG_ENV, raising=False)
    catalog.use_gpu_catalog(None)
    yield
    monkeypatch.delenv(catalog.GPU_CATALOG_ENV, raising=False)
    catalog.use_gpu_catalog(None)


def write(tmp_path, *rows: str, name="gpus.yaml"):
    """A catalog file of `rows`, each a YAML text of one or more rows at any indentation."""
    path = tmp_path / name
    path.write_text("gpus:\n" + "".join(textwrap.indent(textwrap.dedent(r).strip("\n") + "\n", "  ") for r in rows))
    return path


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def listed(*args) -> dict[str, dict]:
    result = run("gpus", "--json", *args)
    assert result.exit_code == 0, result.output
    return {g["name"]: g for g in json.loads(result.stdout)["gpus"]}


# ---- a user's file ----------------------------------------------------------------------------------------------


def test_a_user_type_is_planned_with_the_flag_on_the_command_or_before_it(tmp_path):
    path = write(tmp_path, NEW_TYPE)
    for args in (["plan", "gpt2", "--seq", "1024", "--gpus", "acme-x1", "--json", "--gpu-catalog", path],
                 ["--gpu-catalog", path, "plan", "gpt2", "--seq", "1024", "--gpus", "Acme X1", "--json"]):
        result = run(*args)
        assert result.exit_code == 0, result.output
        plans = json.loads(result.stdout)["plans"]
        assert plans and {p["gpu_type"] for p in plans} == {"Acme-X1-64G"}
    catalog.use_gpu_catalog(path)
    assert catalog.gpu_type("1234").name == "Acme-X1-64G"  # YAML reads the unquoted alias as an int
    assert "Acme-X1-64G" not in listed()  # each invocation starts again from the flag or the environment


def test_a_price_only_override_keeps_every_other_bundled_field(tmp_path):
    bundled = listed()["A10-24G"]
    path = write(tmp_path, """
        - name: NVIDIA A10
          price_per_gpu_hour_usd: 9.99
        """)
    row = listed("--gpu-catalog", path)["A10-24G"]
    assert row["price_per_gpu_hour_usd"] == 9.99
    assert {k: v for k, v in row.items() if k != "price_per_gpu_hour_usd"} == \
        {k: v for k, v in bundled.items() if k != "price_per_gpu_hour_usd"}


def test_the_overridden_price_is_what_plans_cost(tmp_path):
    def cost(*extra):
        result = run("plan", "gpt2", "--seq", "1024", "--gpus", "A10-24G", "--objective", "cost", "--json", *extra)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)["plans"][0]["predicted_cost_usd"]

    before = cost()
    after = cost("--gpu-catalog", write(tmp_path, "- name: A10-24G\n  price_per_gpu_hour_usd: 4.30\n"))
    assert after / before == pytest.approx(4.30 / 0.43, rel=1e-6)  # the bundled RunPod-basis price is 0.43


def test_an_override_may_replace_one_peak_flops_format(tmp_path):
    path = write(tmp_path, "- name: L4-24G\n  peak_flops: {bf16: 100.0e+12}\n")
    catalog.use_gpu_catalog(path)
    l4 = catalog.gpu_type("l4")
    assert l4.peak_flops == {"bf16": 100e12, "fp16": 121e12, "tf32": 60e12, "fp32": 30.3e12}


def test_the_environment_variable_applies_and_the_flag_wins_over_it(tmp_path, monkeypatch):
    from_env = write(tmp_path, "- name: T4\n  price_per_gpu_hour_usd: 1.11\n", name="env.yaml")
    from_flag = write(tmp_path, "- name: T4\n  price_per_gpu_hour_usd: 2.22\n", name="flag.yaml")
    monkeypatch.setenv(catalog.GPU_CATALOG_ENV, str(from_env))
    assert listed()["T4-16G"]["price_per_gpu_hour_usd"] == 1.11
    assert listed("--gpu-catalog", from_flag)["T4-16G"]["price_per_gpu_hour_usd"] == 2.22


def test_a_file_with_two_bad_rows_is_one_error_naming_both(tmp_path):
    path = write(tmp_path, NEW_TYPE, """
        - name: H20-X
          memory_bytes: 0
          peak_flops: {bf16: 1.0e+12, fp16: 1.0e+12, tf32: 0, fp32: 1.0e+12}
          hbm_bandwidth_bytes_s: 4.0e+12
          intra_node_link: infiniband
          intra_node_bandwidth_bytes_s: 450.0e+9
          gpus_per_node: 8
          supports_bf16: true
          price_per_gpu_hour_usd: 1.0
        - name: T4
          price_per_gpu_hour_usd: 0.5
        - name: Half-Row
          memory_bytes: 1000
        """)
    result = run("plan", "gpt2", "--gpu-catalog", path)
    assert result.exit_code == 2
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    assert result.output.count("error:") == 1
    message = " ".join(result.output.split())
    assert f"gpu catalog {path}: row 2 (name 'H20-X'): memory_bytes: must be > 0; " \
           "intra_node_link: must be one of nvlink, pcie or xgmi; row 4 (name 'Half-Row'): a new GPU type must " \
           "give every field, missing peak_flops" in message


def test_a_typo_in_a_field_name_is_reported_not_ignored(tmp_path):
    catalog.use_gpu_catalog(write(tmp_path, "- name: T4\n  price_usd: 0.5\n"))
    with pytest.raises(GpuCatalogError, match=r"row 1 \(name 'T4'\): price_usd: unknown field"):
        catalog.gpu_types()


@pytest.mark.parametrize("field", ["hbm_bandwidth_bytes_s: .inf", "price_per_gpu_hour_usd: .nan",
                                   "peak_flops: {fp16: .inf}"])
def test_an_infinite_or_nan_figure_is_refused(tmp_path, field):
    # an infinite HBM bandwidth divided by zero inside the step-time model: an internal error
    catalog.use_gpu_catalog(write(tmp_path, f"- name: A100-SXM-40G\n  {field}\n"))
    with pytest.raises(GpuCatalogError, match=r"row 1 \(name 'A100-SXM-40G'\): .*must be a finite number"):
        catalog.gpu_types()


def test_a_missing_file_says_what_to_change(tmp_path):
    result = run("gpus", "--gpu-catalog", tmp_path / "nope.yaml")
    assert result.exit_code == 2 and "pass an existing YAML file" in result.output


def test_an_alias_may_name_one_type_only(tmp_path):
    twin = NEW_TYPE.replace("Acme-X1-64G", "Acme-X2-64G").replace('"Acme X1"', '"Acme X2"')
    catalog.use_gpu_catalog(write(tmp_path, NEW_TYPE, twin))
    with pytest.raises(GpuCatalogError, match="'acme-x1' names both Acme-X1-64G and Acme-X2-64G"):
        catalog.gpu_types()


def test_an_override_matching_two_bundled_types_or_overridden_twice_is_refused(tmp_path):
    catalog.use_gpu_catalog(write(tmp_path, "- name: T4\n  aliases: [l4]\n  price_per_gpu_hour_usd: 0.1\n"))
    with pytest.raises(GpuCatalogError, match=r"row 1 \(name 'T4'\): .*several bundled types \(L4-24G, T4-16G\)"):
        catalog.gpu_types()
    catalog.use_gpu_catalog(write(tmp_path, "- name: T4\n  gpus_per_node: 2\n- name: Tesla T4\n  gpus_per_node: 1\n"))
    with pytest.raises(GpuCatalogError, match=r"row 2 .*row 1 already overrides T4-16G"):
        catalog.gpu_types()


# ---- bundled rows added with the user catalog -----------------------------------------------------------------------

# name: (datasheet memory GB, usable GiB lower bound, dense bf16 TFLOP/s, memory bandwidth TB/s, tolerance on TFLOP/s)
# Usable memory lies below the datasheet capacity (which NVIDIA and AMD quote in binary units: "80 GB" H100s report
# 79.6 GiB) and, on every measured row of the catalog, above 92% of it.
DATASHEETS = {
    "B200-180G": (180, 0.96 * 180, 2250, 8.0, 0.01),       # HGX B200: 36 PF sparse BF16 / 8 GPUs / 2; 64 TB/s / 8
    "H20-96G": (96, 0.96 * 96, 148, 4.0, 0.01),            # H20: 148 TF dense BF16, 4.0 TB/s HBM3
    "L20-48G": (48, 0.92 * 48, 119.5, 0.864, 0.01),        # L20: 119.5 TF dense, 864 GB/s GDDR6
    "RTX-5090-32G": (32, 0.96 * 32, 209.5, 1.792, 0.01),   # RTX 5090: 419 TF sparse FP32-accumulate / 2; 1,792 GB/s
    "RTX-PRO6000-96G": (96, 0.92 * 96, 500, 1.792, 0.05),  # 4,000 AI TOPS (FP4 sparse) / 8, only derived: 5%
    "MI300X-192G": (192, 0.96 * 192, 1307.4, 5.3, 0.01),   # MI300X: 1,307.4 TF dense BF16, 5.3 TB/s HBM3
}


@pytest.mark.parametrize("name", DATASHEETS)
def test_new_bundled_rows_match_their_datasheets(name):
    capacity_gb, lowest_gib, bf16_tflops, tb_s, tolerance = DATASHEETS[name]
    gpu = catalog.gpu_type(name)
    assert lowest_gib <= gpu.memory_bytes / 2**30 <= capacity_gb
    assert gpu.peak_flops["bf16"] / 1e12 == pytest.approx(bf16_tflops, rel=tolerance)
    assert gpu.hbm_bandwidth_bytes_s / 1e12 == pytest.approx(tb_s, rel=0.01)
    assert gpu.supports_bf16 and gpu.source


@pytest.mark.parametrize("device_name, row", [("NVIDIA B200", "B200-180G"), ("NVIDIA H20", "H20-96G"),
                                              ("NVIDIA L20", "L20-48G"), ("NVIDIA GeForce RTX 5090", "RTX-5090-32G"),
                                              ("AMD Instinct MI300X", "MI300X-192G"), ("MI300X", "MI300X-192G")])
def test_new_rows_answer_to_their_device_names(device_name, row):
    assert catalog.gpu_type(device_name).name == row


def test_mi300x_links_over_infinity_fabric_and_says_its_runtime_term_is_unmeasured():
    gpu = catalog.gpu_type("mi300x")
    assert gpu.intra_node_link == "xgmi"
    assert gpu.intra_node_bandwidth_bytes_s == pytest.approx(896e9 / 2)  # 896 GB/s peak aggregate, per direction
    result = run("memory", "gpt2", "--seq", "1024", "--gpu", "MI300X", "--json")
    assert result.exit_code == 0, result.output
    assert "measured on CUDA" in json.loads(result.stdout)["gpu_note"]


def test_frenzy_gpus_lists_the_new_rows():
    result = run("gpus")
    assert result.exit_code == 0, result.output
    for name in DATASHEETS:
        assert name in result.stdout


# ---- suggestions ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("typed, first, allowed", [
    ("H800-PCIE", "H800-80G", {"H800-80G", "H100-PCIe-80G", "H100-SXM-80G"}),
    ("MI250X", "MI300X-192G", {"MI300X-192G"}),
    ("RTX-5080", "RTX-5090-32G", {"RTX-5090-32G", "RTX-4090-24G", "RTX-3090-24G", "RTX-2080Ti-11G"}),
])
def test_unknown_names_suggest_the_same_model_then_family(typed, first, allowed):
    with pytest.raises(UnknownNameError) as err:
        catalog.gpu_type(typed)
    assert err.value.suggestions[0] == first
    assert set(err.value.suggestions) <= allowed

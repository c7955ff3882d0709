"""lab.results.hardware: every figure has a source, ridge points from datasheet numbers, a live CPU measurement."""

import json
import math

import pytest

from lab import LabError
from lab.results import hardware
from lab.results.hardware import DEVICES, SPEC_FIELDS, TFLOPS, device


def _cited(source) -> bool:
    """A published page, or a measurement committed in this repository."""
    from lab import REPO_ROOT

    return source.url.startswith("https://") or (REPO_ROOT / source.url).is_file()


def test_required_devices_present():
    for key in ("A10G", "A100-80GB-SXM", "H100-SXM", "H200-SXM", "L4", "RTX-4090"):
        assert key in DEVICES


@pytest.mark.parametrize("key", list(DEVICES))
def test_every_spec_has_a_source(key):
    dev = DEVICES[key]
    for name in SPEC_FIELDS:
        value = getattr(dev, name)
        assert value > 0, f"{key}.{name}"
        source = dev.sources.get(name)
        assert source is not None, f"{key}.{name} has no source"
        assert source.title and _cited(source), f"{key}.{name}"


def test_h100_ridge_from_datasheet_figures():
    # 989.4e12 FLOP/s / 3.35e12 B/s = 295.3 FLOP/byte
    assert device("H100-SXM").ridge() == pytest.approx(989.4 / 3.35, rel=1e-12)
    assert round(device("H100-SXM").ridge()) == 295


def test_h200_same_compute_more_bandwidth():
    h100, h200 = device("H100-SXM"), device("H200-SXM")
    assert h200.bf16_flops == h100.bf16_flops
    assert h200.bandwidth == 4.8e12 and h200.memory_bytes == 141e9
    assert h200.ridge() == pytest.approx(989.4 / 4.8)  # 206.1


def test_dense_not_sparse():
    # datasheets print sparse figures twice the dense ones; the table must hold the dense ones.
    assert device("H100-SXM").bf16_flops == 989.4 * TFLOPS
    assert device("A100-80GB-SXM").bf16_flops == 312 * TFLOPS
    assert device("L4").bf16_flops == 121 * TFLOPS


def test_a10g_notes_the_disagreement():
    note = device("A10G").note
    assert "125" in note and "A10" in note


def test_fp32_ridge_uses_cuda_core_peak():
    a100 = device("A100-80GB-SXM")
    assert a100.ridge("fp32") == pytest.approx(19.5e12 / 2039e9)
    with pytest.raises(LabError):
        a100.peak_flops("int3")


def test_unknown_device_is_a_lab_error():
    with pytest.raises(LabError):
        device("TPU-v9")


def test_match_device_names():
    assert hardware.match_device("NVIDIA H200").key == "H200-SXM"
    assert hardware.match_device("NVIDIA A10G").key == "A10G"
    assert hardware.match_device("NVIDIA L40S") is None
    assert hardware.match_device(None) is None


def test_spec_table_has_ridge_column():
    table = hardware.spec_table()
    row = table.set_index("device").loc["H100-SXM"]
    assert row.ridge_flop_per_byte == pytest.approx(295.34, abs=0.01)


def test_cpu_measurement_is_positive_and_finite():
    ceilings = hardware.measure(use_gpu=False, matmul_sizes=(64, 128), copy_sizes=(1 << 20,), reps=2)
    for value in (ceilings.peak_flops, ceilings.bandwidth, ceilings.ridge()):
        assert math.isfinite(value) and value > 0
    assert {r["kind"] for r in ceilings.rows} == {"matmul", "copy"}


def test_measurement_round_trips_through_a_dataset(tmp_path):
    ceilings = hardware.measure(use_gpu=False, matmul_sizes=(64,), copy_sizes=(1 << 20,), reps=2)
    hardware.write_measurement(ceilings, tmp_path, command="pytest")
    back = hardware.load_measurement(tmp_path)
    assert back.peak_flops == pytest.approx(ceilings.peak_flops)
    assert json.loads((tmp_path / "provenance.json").read_text())["kind"] == "hardware"
    assert (tmp_path / "measurements.csv").read_text().startswith("kind,size,dtype")
    assert hardware.load_measurement(tmp_path / "missing") is None


def test_cli_prints_table(capsys):
    from lab.__main__ import main
    assert main(["hardware", "--sources"]) == 0
    out = capsys.readouterr().out
    assert "H100-SXM" in out and "nvidia.com" in out


def test_memory_hierarchy_levels_are_sourced_and_ordered():
    from lab.results.hardware import SHARED_BYTES_PER_CLOCK_PER_SM, memory_hierarchy

    for key in ("A10G", "H200-SXM"):
        dev = DEVICES[key]
        levels = memory_hierarchy(dev)
        assert [lvl["level"] for lvl in levels][:3] == ["registers", "shared memory", "L2 cache"]
        assert all(_cited(lvl["source"]) for lvl in levels)
        assert levels[0]["size"] == 256 * 1024 * dev.sm_count  # 64K 32-bit registers per SM
        assert levels[1]["per_clock_per_sm"] == SHARED_BYTES_PER_CLOCK_PER_SM == 128
        assert levels[-1]["bandwidth"] == dev.bandwidth and levels[-1]["size"] == dev.memory_bytes
        assert all(lvl["size"] < levels[-1]["size"] / 100 for lvl in levels[:-1])  # on chip: megabytes


def test_memory_hierarchy_figure_draws_every_level():
    from lab.book.plots.hierarchy import plot_memory_hierarchy

    fig = plot_memory_hierarchy([DEVICES["A10G"], DEVICES["H200-SXM"]], source="test")
    texts = [t.get_text() for t in fig.axes[0].texts]
    # device memory at each GPU's bandwidth ceiling: the H200's measured read stream, the A10G's datasheet
    from lab import units
    from lab.results.bandwidth import ceiling
    assert any(units.byte_rate(ceiling("H200-SXM")) in t for t in texts) and any("600 GB/s" in t for t in texts)
    assert sum("B per clock per SM" in t for t in texts) == 2


def test_the_h200_figures_match_what_the_lent_h200_reported():
    """The H200's L2 size is taken from the machine (no datasheet gives it): the table must agree with the data."""
    import json

    from lab import REPO_ROOT

    gpu = json.loads((REPO_ROOT / "data/h200/device-properties/properties.json").read_text())["gpus"][0]
    h200 = DEVICES["H200-SXM"]
    assert gpu["name"] == "NVIDIA H200" and (gpu["cc_major"], gpu["cc_minor"]) == (9, 0)
    assert (gpu["l2_bytes"], gpu["sm_count"], gpu["smem_per_sm_bytes"]) == (h200.l2_bytes, h200.sm_count, h200.smem_per_sm)


def test_device_properties_reads_every_gpu_and_needs_one(tmp_path):
    import subprocess
    import sys
    from types import SimpleNamespace

    from lab import REPO_ROOT
    from lab.measure import device_properties

    props = SimpleNamespace(name="GPU X", major=9, minor=0, multi_processor_count=4, L2_cache_size=2**20,
                            total_memory=2**30, shared_memory_per_multiprocessor=1024, regs_per_multiprocessor=65536,
                            warp_size=32)   # no shared_memory_per_block_optin: an older torch
    cuda = SimpleNamespace(device_count=lambda: 2, get_device_properties=lambda i: props)
    rows = device_properties.read_properties(cuda)
    assert [r["index"] for r in rows] == [0, 1] and rows[1]["l2_bytes"] == 2**20 and rows[0]["sm_count"] == 4
    assert rows[0]["smem_per_block_optin_bytes"] is None
    run = subprocess.run([sys.executable, "-m", "lab", "device-properties", "--out", str(tmp_path / "out")],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin",
                         "PYTHONPATH": str(REPO_ROOT), "CUDA_VISIBLE_DEVICES": ""})
    assert run.returncode == 2 and run.stderr.strip().startswith("error: no CUDA GPU here")
    assert not (tmp_path / "out").exists()

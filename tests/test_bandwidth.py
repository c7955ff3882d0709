"""One bandwidth ceiling per GPU: the H200's measured read stream (checked flat), the A10G's datasheet figure."""

import json
import shutil
from pathlib import Path

import pytest

from lab import LabError
from lab.results import bandwidth, roofline
from lab.results.hardware import DEVICES

FIXTURE = Path(__file__).parent / "fixtures" / "bandwidth"  # the schema of data/h200/bandwidth, made-up numbers


def _root(tmp_path: Path, rows) -> Path:
    """A data root whose H200 read stream has these (size_bytes, gb_per_s) rows."""
    folder = tmp_path / "h200" / "bandwidth"
    folder.mkdir(parents=True)
    shutil.copy(FIXTURE / "h200" / "bandwidth" / "provenance.json", folder)
    lines = ["size_bytes,ms,gb_per_s,reps"] + [f"{s},{s / (r * 1e9) * 1e3},{r},10" for s, r in rows]
    (folder / "read_stream.csv").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_the_h200_ceiling_is_the_median_read_rate_from_256_mb_up():
    fact = bandwidth.bandwidth_ceiling("H200-SXM", FIXTURE)
    # fixture: 64 MiB at 3,950 GB/s (left out: too close to the L2), then 4,310 4,322 4,330 4,334 4,318
    assert fact.value == pytest.approx(4322e9)
    assert fact.source == "data/h200/bandwidth/read_stream.csv" and fact.quantity == "h200.bandwidth_ceiling"
    assert fact.unit == "B/s" and "read-only" in fact.method and "flat within 0.6%" in fact.method
    assert bandwidth.spread("NVIDIA H200", FIXTURE).value == pytest.approx(100 * 24 / 4322)
    assert bandwidth.read_stream("H200-SXM", FIXTURE).sizes == (256 * 2**20, 4 * 2**30)


def test_a_cuda_name_and_a_table_key_are_the_same_gpu():
    assert bandwidth.ceiling("NVIDIA H200", FIXTURE) == bandwidth.ceiling(DEVICES["H200-SXM"], FIXTURE)
    assert bandwidth.short_name("NVIDIA A10G") == "a10g"


def test_a_gpu_never_measured_uses_its_datasheet_and_says_so():
    fact = bandwidth.bandwidth_ceiling("A10G")
    assert fact.value == DEVICES["A10G"].bandwidth and fact.quantity == "a10g.bandwidth_ceiling"
    assert "datasheet" in fact.method and "not measured" in fact.method
    assert bandwidth.spread("A10G").value is None


def test_the_h200_datasheet_is_a_labelled_reference_not_the_ceiling():
    sheet = bandwidth.datasheet_bandwidth("H200-SXM")
    assert sheet.value == 4.8e12 and sheet.quantity == "h200.datasheet_bandwidth"
    assert sheet.quantity != bandwidth.bandwidth_ceiling("H200-SXM", FIXTURE).quantity


def test_a_missing_stream_is_not_measured_and_arithmetic_on_it_fails_clearly(tmp_path):
    fact = bandwidth.bandwidth_ceiling("H200-SXM", tmp_path)
    assert not fact.measured and fact.source == "data/h200/bandwidth/read_stream.csv"
    with pytest.raises(LabError, match=r"read_stream.csv: not measured.*read-only stream"):
        bandwidth.ceiling("H200-SXM", tmp_path)
    with pytest.raises(LabError, match="not measured"):
        bandwidth.percent_of_ceiling(1e12, "H200-SXM", tmp_path)


def test_a_stream_that_is_not_flat_is_refused(tmp_path):
    root = _root(tmp_path, [(256 * 2**20, 4300.0), (2**30, 4300.0), (4 * 2**30, 3000.0)])
    with pytest.raises(LabError, match="not flat"):
        bandwidth.bandwidth_ceiling("H200-SXM", root)


def test_a_stream_that_stops_short_of_4_gb_is_refused(tmp_path):
    root = _root(tmp_path, [(256 * 2**20, 4300.0), (2**30, 4310.0)])
    with pytest.raises(LabError, match="to at least 4 GB"):
        bandwidth.ceiling("H200-SXM", root)


def test_a_stream_whose_provenance_is_not_hardware_is_refused(tmp_path):
    root = _root(tmp_path, [(256 * 2**20, 4300.0), (4 * 2**30, 4310.0)])
    prov = root / "h200" / "bandwidth" / "provenance.json"
    prov.write_text(json.dumps({**json.loads(prov.read_text()), "kind": "kernels"}))
    with pytest.raises(LabError, match="'hardware'"):
        bandwidth.ceiling("H200-SXM", root)


def test_a_stream_without_its_columns_names_the_missing_one(tmp_path):
    root = _root(tmp_path, [(256 * 2**20, 4300.0), (4 * 2**30, 4310.0)])
    (root / "h200" / "bandwidth" / "read_stream.csv").write_text("size_bytes,ms\n268435456,0.06\n")
    with pytest.raises(LabError, match="column 'gb_per_s' is missing"):
        bandwidth.ceiling("H200-SXM", root)


def test_percent_of_ceiling_divides_by_the_ceiling():
    assert bandwidth.percent_of_ceiling(4322e9 / 2, "H200-SXM", FIXTURE) == pytest.approx(50)
    assert bandwidth.percent_of_ceiling(None, "H200-SXM", FIXTURE) is None
    assert bandwidth.percent_of_ceiling(300e9, "A10G") == pytest.approx(50)


def test_the_memory_ladder_shows_device_memory_at_the_ceiling():
    levels = bandwidth.memory_ladder("H200-SXM", FIXTURE)
    assert levels[-1]["bandwidth"] == pytest.approx(4322e9)
    assert levels[-1]["source"].url == "data/h200/bandwidth/read_stream.csv"
    assert bandwidth.memory_ladder("A10G")[-1]["bandwidth"] == DEVICES["A10G"].bandwidth


def test_every_roof_of_a_table_gpu_uses_its_ceiling():
    """Every floor reaches the bandwidth through roofline.roof (sweeps.floors, the explorers, the chapters)."""
    a10g = roofline.roof(DEVICES["A10G"])
    assert a10g.bandwidth == bandwidth.ceiling("A10G")
    assert roofline.roof(DEVICES["H200-SXM"]).bandwidth == bandwidth.ceiling("H200-SXM")

"""One bandwidth ceiling per GPU: the H200's measured read stream (its slope, checked to be one slope), the A10G's
datasheet figure; not measured while the stream is not on file."""

import json
import shutil
from pathlib import Path

import pytest

from lab import LabError
from lab.results import bandwidth, roofline
from lab.results.hardware import DEVICES

# the schema of data/h200/bandwidth with made-up numbers: reads at 4.5 TB/s plus 20 us per call (a 64 MiB read
# below the sizes that count), and a copy beside them
FIXTURE = Path(__file__).parent / "fixtures" / "bandwidth"


def _root(tmp_path: Path, rows) -> Path:
    """A data root whose H200 read stream has these (size_bytes, ms) rows."""
    folder = tmp_path / "h200" / "bandwidth"
    folder.mkdir(parents=True)
    shutil.copy(FIXTURE / "h200" / "bandwidth" / "provenance.json", folder)
    lines = ["kind,size_bytes,ms,gb_per_s,reps"] + [f"read,{s},{ms},{s / ms / 1e6},3" for s, ms in rows]
    (folder / "read_stream.csv").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_the_h200_ceiling_is_the_slope_of_its_read_stream_from_256_mib_up():
    found = bandwidth.read_ceiling("NVIDIA H200", FIXTURE)
    assert found.bytes_per_s == pytest.approx(4.5e12) and found.intercept_s == pytest.approx(20e-6)
    assert found.spread == pytest.approx(0, abs=1e-6) and found.sizes == (256 << 20, 4 << 30)
    fact = bandwidth.bandwidth_ceiling("H200-SXM", FIXTURE)
    assert fact.value == pytest.approx(4.5e12) and fact.unit == "B/s"
    assert fact.source == "data/h200/bandwidth/read_stream.csv" and fact.quantity == "bandwidth_ceiling[h200]"
    assert "slope" in fact.method and "read-only" in fact.method
    # one call's bytes / time is not the ceiling: it rises with the size (the fixed cost per call)
    rates = [r["gb_per_s"] for r in bandwidth.per_call_rates("H200-SXM", FIXTURE)]
    assert rates == sorted(rates) and rates[-1] < 4500


def test_slope_rate_is_the_one_way_from_times_to_a_rate():
    rate, intercept = bandwidth.slope_rate([1e9, 2e9, 4e9], [1e-3 + 1e9 / 2e12, 1e-3 + 2e9 / 2e12, 1e-3 + 4e9 / 2e12])
    assert rate == pytest.approx(2e12) and intercept == pytest.approx(1e-3)


def test_a_cuda_name_and_a_table_key_are_the_same_gpu():
    assert bandwidth.ceiling("NVIDIA H200", FIXTURE) == bandwidth.ceiling(DEVICES["H200-SXM"], FIXTURE)
    assert bandwidth.short_name("NVIDIA A10G") == "a10g"


def test_a_gpu_never_measured_uses_its_datasheet_and_says_so():
    fact = bandwidth.bandwidth_ceiling("A10G")
    assert fact.value == DEVICES["A10G"].bandwidth and fact.quantity == "bandwidth_ceiling.datasheet[a10g]"
    assert "datasheet" in fact.method and "not measured" in fact.method
    assert bandwidth.spread("A10G").value is None


def test_the_h200_datasheet_is_a_labelled_reference_not_the_ceiling():
    sheet = bandwidth.datasheet_bandwidth("H200-SXM")
    assert sheet.value == 4.8e12 and sheet.quantity == "datasheet.bandwidth[h200]"
    assert sheet.quantity != bandwidth.bandwidth_ceiling("H200-SXM", FIXTURE).quantity


def test_a_missing_stream_is_not_measured_not_the_datasheet(tmp_path):
    fact = bandwidth.bandwidth_ceiling("H200-SXM", tmp_path)
    assert not fact.measured and fact.source == "data/h200/bandwidth/read_stream.csv"
    with pytest.raises(LabError, match=r"read_stream.csv: not measured.*read-only stream"):
        bandwidth.ceiling("H200-SXM", tmp_path)
    with pytest.raises(LabError, match="not measured"):
        bandwidth.percent_of_ceiling(1e12, "H200-SXM", tmp_path)


def test_a_stream_whose_slopes_disagree_is_refused(tmp_path):
    mib = 1 << 20
    root = _root(tmp_path, [(256 * mib, 0.08), (1024 * mib, 0.26), (4096 * mib, 1.4)])  # the last step: 3 TB/s
    with pytest.raises(LabError, match="not one ceiling"):
        bandwidth.bandwidth_ceiling("H200-SXM", root)


def test_a_stream_that_stops_short_of_4_gb_is_refused(tmp_path):
    mib = 1 << 20
    root = _root(tmp_path, [(256 * mib, 0.08), (512 * mib, 0.14), (1024 * mib, 0.26)])
    with pytest.raises(LabError, match="to at least 4 GB"):
        bandwidth.ceiling("H200-SXM", root)


def test_a_stream_whose_provenance_is_not_hardware_is_refused(tmp_path):
    root = _root(tmp_path, [(256 << 20, 0.08), (1 << 30, 0.26), (4 << 30, 0.98)])
    prov = root / "h200" / "bandwidth" / "provenance.json"
    prov.write_text(json.dumps({**json.loads(prov.read_text()), "kind": "kernels"}))
    with pytest.raises(LabError, match="'hardware'"):
        bandwidth.ceiling("H200-SXM", root)


def test_a_stream_without_its_columns_names_the_missing_one(tmp_path):
    root = _root(tmp_path, [(256 << 20, 0.08), (4 << 30, 0.98)])
    (root / "h200" / "bandwidth" / "read_stream.csv").write_text("kind,size_bytes,ms\nread,268435456,0.06\n")
    with pytest.raises(LabError, match="column 'gb_per_s' is missing"):
        bandwidth.ceiling("H200-SXM", root)


def test_percent_of_ceiling_divides_by_the_ceiling():
    assert bandwidth.percent_of_ceiling(2.25e12, "H200-SXM", FIXTURE) == pytest.approx(50)
    assert bandwidth.percent_of_ceiling(None, "H200-SXM", FIXTURE) is None
    assert bandwidth.percent_of_ceiling(300e9, "A10G") == pytest.approx(50)


def test_the_memory_ladder_shows_device_memory_at_the_ceiling():
    levels = bandwidth.memory_ladder("H200-SXM", FIXTURE)
    assert levels[-1]["bandwidth"] == pytest.approx(4.5e12)
    assert levels[-1]["source"].url == "data/h200/bandwidth/read_stream.csv"
    assert bandwidth.memory_ladder("A10G")[-1]["bandwidth"] == DEVICES["A10G"].bandwidth


def test_every_roof_of_a_table_gpu_uses_its_ceiling():
    """Every floor reaches the bandwidth through roofline.roof (sweeps.floors, the explorers, the chapters)."""
    assert roofline.roof(DEVICES["A10G"]).bandwidth == bandwidth.ceiling("A10G")
    assert roofline.roof(DEVICES["H200-SXM"]).bandwidth == bandwidth.ceiling("H200-SXM")
    assert bandwidth.ceiling("H200-SXM") != DEVICES["H200-SXM"].bandwidth  # the committed stream, not the datasheet

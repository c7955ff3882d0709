"""Measured DRAM bytes (Nsight Compute) beside the two model counts: absent -> "not measured", present -> placed."""

import shutil
from pathlib import Path

import pytest

from lab import LabError
from lab.results import dram_bytes, iomodel
from lab.results.facts import Fact

FIXTURE = Path(__file__).parent / "fixtures" / "dram-bytes"


@pytest.fixture
def root(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / dram_bytes.DATASET)
    return tmp_path


def test_absent_file_is_not_measured(tmp_path):
    assert dram_bytes.load(tmp_path) is None
    facts = dram_bytes.facts("ours-tuned", 32768, root=tmp_path)
    assert facts and all(isinstance(f, Fact) and not f.measured for f in facts.values())
    assert all("dram-bytes" in f.source for f in facts.values())


def test_counts_beside_the_measurement(root):
    table = dram_bytes.load(root)
    assert table.attrs["block"] == 128  # H200: 228 KiB of shared memory, d = 128, bf16
    tuned = dram_bytes.row(table, "ours-tuned", 32768)
    counts = iomodel.prefill_byte_counts(32768, 28, 4, 128, 128)
    assert tuned["compulsory_bytes"] == counts["compulsory"] == 2 * (2 * 32768 * 28 * 128 + 2 * 32768 * 4 * 128)
    assert tuned["reread_bytes"] == counts["reread"]
    assert tuned["measured_bytes"] == 3_000_000_000 + 268_435_456
    assert tuned["compulsory_bytes"] < tuned["measured_bytes"] < tuned["reread_bytes"]
    assert 0 < tuned["position"] < 1
    assert tuned["intensity_reread"] < tuned["intensity_measured"] < tuned["intensity_compulsory"]
    assert tuned["achieved_flops"] == pytest.approx(counts["flops"] / 15.1e-3)


def test_facts_when_measured(root):
    facts = dram_bytes.facts("ours-tuned", 32768, root=root, prefix="m")
    assert facts["m_bytes"].value == "3.27 GB"
    assert facts["m_l2"].value == "96%"
    assert facts["m_where"].value == "between the two counts"
    assert dram_bytes.facts("sdpa-cudnn", 32768, root=root)["dram_where"].value == "outside the two counts"
    assert not dram_bytes.facts("ours-tuned", 8192, root=root)["dram_bytes"].measured  # a length not measured


def test_missing_column_is_a_clear_error(root):
    path = root / dram_bytes.DATASET / dram_bytes.FILE
    path.write_text(path.read_text().replace("l2_hit_pct", "l2"))
    with pytest.raises(LabError, match="l2_hit_pct"):
        dram_bytes.load(root)


def test_bad_causal_flag_is_a_clear_error(root):
    path = root / dram_bytes.DATASET / dram_bytes.FILE
    path.write_text(path.read_text().replace(",True,", ",maybe,", 1))
    with pytest.raises(LabError, match="causal"):
        dram_bytes.load(root)

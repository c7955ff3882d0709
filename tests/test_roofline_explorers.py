"""The roofline chapters' explorers: every combination computes, numbers agree with lab.results.iomodel."""

from pathlib import Path

import pytest

from lab.book import roofline_explorers
from lab.book.roofline_explorers import LENGTHS, attention_bytes_explorer, roofline_explorer
from lab.results import dram_bytes, iomodel
from lab.results.hardware import DEVICES, GB
from lab.results.modelshape import qwen25_7b


def test_lengths_span_256_to_131072():
    assert LENGTHS[0] == 256 and LENGTHS[-1] == 131072


@pytest.mark.parametrize("make", [roofline_explorer, attention_bytes_explorer])
def test_every_combination_builds_a_static_face(make):
    explorer = make()
    data = explorer.static_data()
    assert data  # raises LabError if any combination fails or changes its readouts


def test_bytes_readouts_match_iomodel():
    view = attention_bytes_explorer().compute(length=4096, gpu="H200-SXM", dtype="bf16", phase="prefill")
    values = {r.name: r.value for r in view.readouts}
    dev = DEVICES["H200-SXM"]
    expected = iomodel.attention_hbm_bytes(qwen25_7b(), 4096, "prefill", "naive", dev.smem_per_sm, per="layer") / GB
    assert values["naive_gb"] == pytest.approx(expected)
    assert values["ratio"] > 1
    assert values["fits"] == "yes"
    too_long = attention_bytes_explorer().compute(length=131072, gpu="A10G", dtype="bf16", phase="prefill")
    assert {r.name: r.value for r in too_long.readouts}["fits"].startswith("no")


def test_roofline_readouts_name_the_side_of_the_ridge():
    view = roofline_explorer().compute(length=8192, gpu="H100-SXM", dtype="bf16")
    values = {r.name: r.value for r in view.readouts}
    assert round(values["ridge"]) == 295
    assert values["ai_softmax"] == pytest.approx(1.25)
    assert values["side_flash"].startswith("compute-bound")  # on compulsory bytes, far right of the ridge
    assert values["ai_reread"] < values["ridge"] < values["ai_compulsory"]
    short = {r.name: r.value for r in roofline_explorer().compute(length=256, gpu="H100-SXM", dtype="bf16").readouts}
    assert short["side_flash"].startswith("memory-bound")  # 256 tokens: too little work per byte even moved once


def test_measured_readouts_follow_the_data(monkeypatch, tmp_path):
    view = roofline_explorer().compute(length=16384, gpu="H200-SXM", dtype="bf16")
    values = {r.name: r.value for r in view.readouts}
    if dram_bytes.load() is None:
        assert values["ai_measured"] == "not measured yet"
    import shutil
    shutil.copytree(Path(__file__).parent / "fixtures" / "dram-bytes", tmp_path / dram_bytes.DATASET)
    monkeypatch.setattr(roofline_explorers, "_measured_table", lambda: dram_bytes.load(tmp_path))
    view = roofline_explorer().compute(length=32768, gpu="H200-SXM", dtype="bf16")
    values = {r.name: r.value for r in view.readouts}
    assert "ours-tuned" in values["ai_measured"] and "sdpa-flash" in values["ai_measured"]
    assert any(s.name == "measured bytes: ours-tuned" for s in view.chart.series)
    bytes_view = attention_bytes_explorer().compute(length=32768, gpu="H200-SXM", dtype="bf16", phase="prefill")
    measured = {r.name: r.value for r in bytes_view.readouts}["measured_gb"]
    assert "ours-tuned 3.27 GB" in measured
    elsewhere = {r.name: r.value for r in roofline_explorer().compute(length=32768, gpu="A10G", dtype="bf16").readouts}
    assert elsewhere["ai_measured"].startswith("measured only on the H200")

"""The roofline chapters' explorers: every combination computes, numbers agree with lab.results.iomodel."""

import pytest

from lab.book.roofline_explorers import LENGTHS, attention_bytes_explorer, roofline_explorer
from lab.results import iomodel
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
    assert values["side_flash"].startswith(("memory-bound", "compute-bound"))

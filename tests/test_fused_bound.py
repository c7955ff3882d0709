"""The re-read count held against the measurements: both say the bytes it counts never reached HBM."""

import pytest

from lab.results import fused_bound
from lab.results.hardware import DEVICES
from lab.results.modelshape import QWEN25_7B


def test_h200_best_kernel_beats_the_reread_bound():
    check = fused_bound.h200_kernel_check("sdpa-cudnn", 32768)
    assert check["block"] == 128
    assert check["compulsory_ms"] < check["compute_ms"] < check["ms"]
    # faster than the re-read count allows at the H200's bandwidth ceiling: its bytes did not all reach HBM
    assert check["ms"] < check["reread_ms"]
    # ...but the margin is thin: at the datasheet's bandwidth the same bytes fit in less time than the kernel took
    assert check["reread_ms_datasheet"] == pytest.approx(check["reread_ms"] * check["bandwidth"] / DEVICES["H200-SXM"].bandwidth)
    assert check["reread_ms_datasheet"] < check["ms"]
    assert check["flops_per_s"] == pytest.approx(check["flops"] / (check["ms"] * 1e-3))


def test_quadratic_floors_by_hand():
    floors = fused_bound.quadratic_floors(QWEN25_7B, DEVICES["A10G"])
    assert floors["block"] == 64  # 100 KiB / (4 · 128 · 2 B) = 100 -> 64
    # compute: 2·d·H·L FLOPs per token² at 70 TFLOP/s
    assert floors["compute"] == pytest.approx(2 * 128 * 28 * 28 / 70e12)
    # re-read: about 2·d/block = 4 bytes per token² per head (causal), 28 heads, 28 layers, at 600 GB/s
    assert floors["reread"] == pytest.approx(4 * 28 * 28 / 600e9, rel=0.01)


def test_a10g_fit_sits_between_compute_and_reread_floors():
    check = fused_bound.a10g_fit_check(QWEN25_7B)
    assert check["compute"] < check["fitted"]["FLASH_ATTN"] < check["reread"]

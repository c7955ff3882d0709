"""lab.book.sweep_explorer: the one sweep explorer shows the numbers in the reference data, for every choice."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from lab.book.sweep_explorer import a10g_prefill_explorer, study_of
from lab.results.data import load, load_sweeps

A10G = "reference/a10g-vllm0.11-qwen2.5-7b"


@pytest.fixture(scope="module")
def explorer():
    return a10g_prefill_explorer()


@pytest.fixture(scope="module")
def sweep():
    return load(A10G).csv("sweep.csv")


def test_controls_come_from_the_data(explorer, sweep):
    controls = {c.name: c for c in explorer.controls}
    every_sweep = load_sweeps()  # the A10G study, our H200 arms and any local run
    assert controls["length"].values == sorted(every_sweep["target_len"].unique().tolist())
    assert set(sweep["target_len"]) <= set(controls["length"].values)
    assert {"FLASH_ATTN", "FLEX_ATTENTION"} <= set(controls["backend"].values)
    assert controls["backend"].default == "FLASH_ATTN"
    assert controls["study"].values[0] == A10G
    assert controls["study"].labels[0] == "NVIDIA A10G, vLLM 0.11.0"
    assert controls["length"].default == 8192
    assert controls["metric"].values == ["TTFT", "ITL"]


@pytest.mark.parametrize("arm", ["FLASH_ATTN", "FLEX_ATTENTION"])
def test_readouts_equal_the_sweep_rows(explorer, sweep, arm):
    for _, row in sweep[sweep["arm"] == arm].iterrows():
        view = explorer.compute(length=int(row["target_len"]), backend=arm, study=A10G)
        shown = {r.name: r.text for r in view.readouts}
        assert shown["ttft"] == f"{row['ttft_s']:.3f} s"
        assert shown["prefill"] == f"{row['prefill_ms_per_token']:.3f} ms"
        assert shown["itl"] == f"{row['itl_ms']:.2f} ms"
        marker = view.chart.marker
        assert (marker.x, marker.y) == (row["actual_len"], row["ttft_s"])


def test_hand_checked_point(explorer):
    # s1.log, FLEX_ATTENTION arm: "30720   30720    16.410        0.534      91.83"
    view = explorer.compute(length=30720, backend="FLEX_ATTENTION", study=A10G)
    assert [r.text for r in view.readouts][:3] == ["16.410 s", "0.534 ms", "91.83 ms"]


@pytest.mark.parametrize("arm, n, published_pct", [("FLASH_ATTN", 2048, 3.4), ("FLASH_ATTN", 8192, 12.2),
                                                    ("FLEX_ATTENTION", 2048, 8.5), ("FLEX_ATTENTION", 8192, 27.0)])
def test_quadratic_share_matches_the_published_fit(explorer, arm, n, published_pct):
    # The study printed its share at n = 2048 and 8192; the measured point is one or two tokens longer.
    view = explorer.compute(length=n, backend=arm, study=A10G)
    share = float({r.name: r for r in view.readouts}["quad_share"].value)
    assert share == pytest.approx(published_pct, abs=0.3)


def test_chart_has_every_arm_and_the_fit(explorer):
    view = explorer.compute(length=2048, backend="FLEX_ATTENTION", study=A10G)
    names = [s.name for s in view.chart.series]
    assert names == ["FLASH_ATTN", "FLEX_ATTENTION", "roofline floor", "FLEX_ATTENTION quadratic fit"]
    fit = view.chart.series[-1]
    assert fit.dashed and fit.color == view.chart.series[1].color
    # The published FLEX fit at the longest prompt: 0.0469 + 223.5e-6*30720 + 10099.6e-12*30720^2 = 16.443 s
    assert fit.ys[-1] == pytest.approx(16.44, abs=0.15)
    assert "NVIDIA A10G" in view.chart.source


def test_study_of():
    assert study_of("h200/vllm0.26-qwen2.5-7b/FLASH_ATTN_FA3") == "h200/vllm0.26-qwen2.5-7b"
    assert study_of("reference/a10g-vllm0.11-qwen2.5-7b") == "reference/a10g-vllm0.11-qwen2.5-7b"


def test_a_local_run_appears_as_a_new_choice(tmp_path):
    # A reader's own run (one arm, a failed point, a length the A10G study did not measure).
    root = tmp_path / "data"
    shutil.copytree(load(A10G).path, root / "reference" / "a10g-vllm0.11-qwen2.5-7b")
    run = root / "local" / "my-run" / "TRITON_ATTN"
    run.mkdir(parents=True)
    prov = dict(load(A10G).provenance, kind="vllm-sweep", gpu="NVIDIA L4", vllm="0.26.0", date="2026-11-30")
    prov.pop("source")
    import json

    (run / "provenance.json").write_text(json.dumps(prov))
    pd.DataFrame({"arm": ["TRITON_ATTN"] * 4, "backend": ["TRITON_ATTN"] * 4, "target_len": [256, 1024, 2048, 65536],
                  "actual_len": [257, 1025, 2050, None], "ttft_s": [0.2, 0.5, 1.0, None],
                  "prefill_ms_per_token": [0.8, 0.5, 0.5, None], "itl_ms": [40.0, 41.0, 42.0, None]}
                 ).to_csv(run / "sweep.csv", index=False)
    explorer = a10g_prefill_explorer(root)
    studies = {c.name: c for c in explorer.controls}["study"]
    assert studies.values == [A10G, "local/my-run"]
    assert studies.labels[1] == "NVIDIA L4, vLLM 0.26.0 (your run)"
    failed = explorer.compute(length=65536, backend="TRITON_ATTN", study="local/my-run")
    shown = {r.name: r.text for r in failed.readouts}
    assert shown["ttft"] == shown["itl"] == "did not finish"
    assert "did not finish" in failed.note and failed.chart.marker is None
    # the failed length still shows the L4's roofline floor; the fit is not read 32x past its measured range
    assert shown["prefill_floor"].endswith(" s") and shown["fit"] == "not read past the measured lengths"
    assert [s.name for s in failed.chart.series][:2] == ["TRITON_ATTN", "roofline floor"]
    missing = explorer.compute(length=256, backend="FLASH_ATTN", study="local/my-run")
    assert "No FLASH_ATTN measurement at 256 tokens on NVIDIA L4" in missing.note
    ok = explorer.compute(length=1024, backend="TRITON_ATTN", study="local/my-run")
    assert ok.readouts[0].text == "0.500 s"
    explorer.static_html()  # every combination renders


def test_every_state_shows_data(explorer):
    # a length or backend a study did not measure still shows its floor (and fit, within range)
    for combo in explorer.combinations():
        view = explorer.compute(**combo)
        assert any(r.text != "n/a" for r in view.readouts), combo


def test_provenance_travels_with_the_table():
    from lab.results.sweeps import chunk_size, gpu_count, provenance, sweep_table

    table = sweep_table()
    assert {"provenance", "vllm", "chunk", "tensor_parallel"} <= set(table.columns)
    assert provenance(table, A10G)["gpu"] == "NVIDIA A10G"
    assert chunk_size(table, A10G) == 2048 and gpu_count(table, A10G) == 1


def test_the_fit_is_not_read_far_past_the_measured_range(explorer):
    view = explorer.compute(length=131072, backend="FLASH_ATTN", study=A10G)
    shown = {r.name: r.text for r in view.readouts}
    assert shown["fit"] == "not read past the measured lengths" and shown["prefill_floor"].endswith(" s")

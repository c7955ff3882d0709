"""lab.results.census_windows: published + measured census tables, derived figures, the chapter's explorer."""

from __future__ import annotations

import json

import pytest

from lab import LabError
from lab.book.census_explorer import census_explorer
from lab.measure.capture import census_rows, write_rows
from lab.results import census_windows as cd


def _provenance(kind, gpu):
    record = {"kind": kind, "gpu": gpu, "driver": None, "cuda": None, "torch": None, "triton": None,
              "vllm": "0.11.0" if kind == "reference" else "0.26.0", "model": "Qwen2.5-7B", "dtype": "bfloat16",
              "flags": {}, "date": "2026-11-30", "command": "test"}
    if kind == "reference":
        record["source"] = {"title": "The Inference Wall, part 8"}
    return record


@pytest.fixture
def root(tmp_path):
    ref = tmp_path / "reference" / "a10g"
    ref.mkdir(parents=True)
    (ref / "provenance.json").write_text(json.dumps(_provenance("reference", "NVIDIA A10G")))
    (ref / "census.csv").write_text(
        "phase,tokens,arm,metric,value,unit\n"
        "prefill,28673,FLASH_ATTN,matmul_ms,5756.0,ms\n"
        "prefill,28673,FLASH_ATTN,attention_ms,3098.0,ms\n"
        "prefill,28673,FLASH_ATTN,window_s,9.2,s\n"
        "decode,28673,FLEX_ATTENTION,attention_share_pct,58.0,%\n"
        "decode,28673,FLEX_ATTENTION,window_s,17.0,s\n")
    ours = tmp_path / "h200" / "study" / "traces" / "FLASH_ATTN-FA3"
    ours.mkdir(parents=True)
    (ours / "provenance.json").write_text(json.dumps(_provenance("census", "NVIDIA H200")))
    result = {"kernel_ms": 100.0, "families": {"attention": {"ms": 30.0, "share": 0.3},
                                                "matmul": {"ms": 60.0, "share": 0.6},
                                                "other": {"ms": 10.0, "share": 0.1}},
              "steps": {"kernel_ms_by_phase": {"decode": 100.0}}}
    write_rows(ours / "census.csv", census_rows(result, "decode", 2048, "FLASH_ATTN/FA3"))
    return tmp_path


def test_names_and_lengths():
    assert cd.backend_of("FLASH_ATTN/FA3") == cd.backend_of("FLASH_ATTN") == "FlashAttention"
    assert cd.backend_of("FLEX_ATTENTION") == "FlexAttention"
    assert [cd.nominal(n) for n in (2050, 8193, 28673)] == [2048, 8192, 28672]
    assert cd.short_gpu("NVIDIA H200") == "H200"
    assert cd.short_gpu("NVIDIA H100 80GB HBM3") == "H100"
    assert cd.short_gpu("NVIDIA GeForce RTX 4090") == "RTX 4090"


def test_published_windows_are_completed_by_arithmetic(root):
    table = cd.census_table(root)
    prefill = cd.window(table, "A10G", "prefill", 28673, "FlashAttention")
    # other = 9200 - 3098 - 5756 = 346 ms
    assert prefill.ms == {"attention": 3098.0, "matmul": 5756.0, "communication": 0.0, "other": pytest.approx(346.0)}
    assert prefill.derived == ["other = window - the others"]
    assert prefill.share("attention") == pytest.approx(100 * 3098 / 9200)
    # The study's decode window is filed as decode-naive; attention = 58% of 17.0 s = 9860 ms.
    naive = cd.window(table, "A10G", "decode-naive", 28672, "FlexAttention")
    assert naive.ms["attention"] == pytest.approx(9860.0) and naive.ms["matmul"] is None
    assert not cd.window(table, "A10G", "decode", 28672, "FlexAttention").known


def test_measured_rows_read_back(root):
    table = cd.census_table(root)
    w = cd.window(table, "H200", "decode", 2048, "FlashAttention")
    assert w.source == "measured" and w.window_ms == 100.0 and w.ms["matmul"] == 60.0 and w.derived == []
    assert cd.gpus(table) == ["A10G", "H200"]


def test_explorer_covers_every_combination(root):
    explorer = census_explorer(root)
    # phases x lengths x backends (FlashAttention, FlexAttention, OURS) x GPUs
    assert len(explorer.combinations()) == 3 * 3 * 3 * 2
    for combo in explorer.combinations():
        explorer.compute(**combo)
    missing = explorer.compute(phase="prefill", length=2048, backend="FlexAttention", gpu="H200")
    assert "not captured yet" in missing.note
    naive = explorer.compute(phase="decode-naive", length=28672, backend="FlexAttention", gpu="A10G")
    assert [r.text for r in naive.readouts][-1] == "58.0%"


def test_matmul_launches_pairs_the_same_kernels_of_both_backends():
    launches = cd.matmul_launches(window="prefill-28672")
    h200 = launches[launches.gpu == "H200"]
    assert len(h200) >= 3 and h200["kernel"].str.startswith("nvjet_sm90").all()
    # same work in both windows: every matmul kernel launched equally often
    assert (h200["FlashAttention: launches"] == h200["FlexAttention: launches"]).all()
    assert (h200["FlashAttention: ms per launch"] > 0).all()


def test_matmul_launches_without_captures_says_what_to_do(tmp_path):
    with pytest.raises(LabError, match="no census of window 'prefill-28672'; capture it"):
        cd.matmul_launches(root=tmp_path)


def test_window_clocks_reads_the_samples_beside_each_trace():
    clocks = cd.window_clocks()
    h200 = clocks[(clocks.gpu == "H200") & (clocks.window == "prefill-28672")].set_index("backend")
    assert set(h200.index) == set(cd.BACKENDS)
    assert (h200.samples > 0).all() and (h200.sm_mhz_median > 0).all()
    assert (h200.matmul_ms > 0).all() and (h200.window_ms > h200.matmul_ms).all()
    assert h200.limit_share.between(0, 1).all()
    assert (h200.power_capped <= h200.samples).all() and (h200.readings_held >= 1).all()
    assert (h200.sm_mhz_min <= h200.sm_mhz_first).all() and (h200.sm_mhz_first <= h200.sm_mhz_max).all()
    assert (h200.interval_ms == 50).all()


def test_window_clocks_summarises_limits_and_tolerates_no_census(tmp_path):
    folder = tmp_path / "h200" / "study" / "traces" / "flex_attention"
    folder.mkdir(parents=True)
    (folder / "provenance.json").write_text(json.dumps({**_provenance("census", "NVIDIA H200"),
                                                        "flags": {"arm": "FLEX_ATTENTION"}}))
    (folder / "decode-2048.clocks.json").write_text(json.dumps({
        "samples": 4, "sm_mhz": {"median": 1800, "min": 1700}, "power_w": {"median": 650},
        "limits_active": {"software power cap": 3, "hardware slowdown": 1}}))
    (row,) = cd.window_clocks(root=tmp_path).itertuples()
    assert (row.backend, row.window, row.limit, row.limit_share) == ("FlexAttention", "decode-2048",
                                                                       "software power cap", 0.75)
    assert row.matmul_ms != row.matmul_ms        # no census beside it: NaN, not an error
    assert row.power_capped != row.power_capped  # a summary without its series: no count, not zero
    assert cd.window_clocks(root=tmp_path / "empty").empty


def test_window_clocks_label_a_tensor_parallel_server_apart(tmp_path):
    for study, flags in (("one", {"arm": "FLASH_ATTN/FA3"}), ("tp2", {"arm": "FLASH_ATTN/FA3", "tensor_parallel_size": 2})):
        folder = tmp_path / "h200" / study / "traces" / "flash_attn-fa3"
        folder.mkdir(parents=True)
        (folder / "provenance.json").write_text(json.dumps({**_provenance("census", "NVIDIA H200"), "flags": flags}))
        (folder / "prefill-8192.clocks.json").write_text(json.dumps({"samples": 2, "sm_mhz": {"median": 1700}}))
    clocks = cd.window_clocks(root=tmp_path)
    assert sorted(clocks.gpu) == ["2x H200", "H200"]  # two prefill-8192 rows, told apart


def test_a_window_with_communication_time_reads_back_and_draws(root):
    # a tensor-parallel capture: NCCL time is its own family; one-GPU windows show 0 ms of it
    ours = root / "h200" / "study" / "traces" / "FLASH_ATTN-FA3"
    result = {"kernel_ms": 100.0, "families": {"attention": {"ms": 30.0, "share": 0.3},
                                                "matmul": {"ms": 50.0, "share": 0.5},
                                                "communication": {"ms": 12.0, "share": 0.12},
                                                "other": {"ms": 8.0, "share": 0.08}},
              "steps": {"kernel_ms_by_phase": {"prefill": 100.0}}}
    rows = census_rows(result, "prefill", 2048, "FLASH_ATTN/FA3")
    with open(ours / "census.csv") as fh:
        old = fh.read()
    (ours / "census.csv").write_text(old + "".join(f"{r['phase']},{r['tokens']},{r['arm']},{r['metric']},{r['value']},"
                                                   f"{r['unit']}\n" for r in rows))
    table = cd.census_table(root)
    w = cd.window(table, "H200", "prefill", 2048, "FlashAttention")
    assert w.ms == {"attention": 30.0, "matmul": 50.0, "communication": 12.0, "other": 8.0} and w.derived == []
    view = census_explorer(root).compute(phase="prefill", length=2048, backend="FlashAttention", gpu="H200")
    assert {r.name: r.value for r in view.readouts}["communication"] == 12.0
    assert "communication" in [s.name for s in view.chart.series]
    from lab.book.plots.census import plot_census_panels

    fig = plot_census_panels({"prefill 2k": [w], "decode 2k": [cd.window(table, "H200", "decode", 2048,
                                                                           "FlashAttention")]}, "test")
    assert "communication" in [t.get_text() for t in fig.legends[0].get_texts()]
    one_gpu = plot_census_panels({"decode 2k": [cd.window(table, "H200", "decode", 2048, "FlashAttention")]}, "test")
    assert "communication" not in [t.get_text() for t in one_gpu.legends[0].get_texts()]   # 0 ms: no empty entry
    flat = census_explorer(root).compute(phase="decode", length=2048, backend="FlashAttention", gpu="H200")
    assert {r.name: r.value for r in flat.readouts}["communication"] == 0.0
    assert "communication" not in [s.name for s in flat.chart.series]


def test_every_state_of_the_chapter_explorer_shows_data():
    explorer = census_explorer()
    for combo in explorer.combinations():
        if explorer.missing(**combo):   # said why and never shown (the page moves to the nearest choice with data)
            continue
        view = explorer.compute(**combo)
        assert any(r.text != "n/a" for r in view.readouts), combo
    assert explorer.missing(phase="prefill", length=2048, backend="FlexAttention", gpu="2x H200")
    # the study published no decode-only window: its whole-request window is shown, and the note says so
    view = explorer.compute(phase="decode", length=2048, backend="FlashAttention", gpu="A10G")
    assert "shown instead: its decode window as in the study (prefill included) at 28672 tokens" in view.note
    assert {r.name: r.value for r in view.readouts}["window"] == pytest.approx(10300.0)

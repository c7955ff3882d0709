"""lab.results.kernel_runs: launches, the run catalogue, block vs round timing and clocks, by value."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from lab import LabError
from lab.results import kernel_runs


def test_parse_launch_reads_a_recorded_launch_as_values():
    assert kernel_runs.parse_launch("BLOCK_M=128 BLOCK_N=64 num_warps=8 num_stages=2 maxnreg=128 tma=True") == {
        "block_m": 128, "block_n": 64, "warps": 8, "stages": 2, "maxnreg": 128, "tma": True}
    plain = kernel_runs.parse_launch("BLOCK_M=64 BLOCK_N=64 num_warps=4 num_stages=3 maxnreg=None tma=False")
    assert plain["maxnreg"] is None and plain["tma"] is False
    assert kernel_runs.parse_launch("BLOCK_M=64 BLOCK_N=32 num_warps=4 num_stages=3")["tma"] is None
    for bad in ("", "BLOCK_M=64", "BLOCK_M=x BLOCK_N=64 num_warps=4 num_stages=3", None):
        with pytest.raises(LabError, match="not a recorded launch"):
            kernel_runs.parse_launch(bad)


def test_picked_launches_follow_the_committed_run():
    from lab.results import data

    prefill = data.load(kernel_runs.RECORD).csv("prefill.csv", ("candidate", "n", "status", "config"))
    picked = kernel_runs.picked_launches(prefill).set_index("n")
    assert list(picked.index) == sorted(prefill.n.unique())
    row = prefill[(prefill.candidate == "ours-tuned") & (prefill.n == 16384)].iloc[0]
    assert picked.loc[16384].to_dict() == kernel_runs.parse_launch(row.config)
    with pytest.raises(LabError, match="no timed ours-tuned"):
        kernel_runs.picked_launches(prefill[prefill.candidate != "ours-tuned"])


def _run(root, folder, rows, flags=None, seconds=10.0):
    (root / folder).mkdir(parents=True)
    record = {"kind": "kernels", "gpu": "NVIDIA H200", "driver": "580", "cuda": "13.0", "torch": "2.11.0",
              "triton": "3.6.0", "vllm": None, "model": None, "dtype": "bfloat16", "flags": flags or {},
              "date": "2026-11-30T08:00:00+00:00", "command": f"python -m lab bench --out {folder}",
              "seconds": seconds, "code": "commit abc1234"}
    (root / folder / "provenance.json").write_text(json.dumps(record))
    pd.DataFrame(rows).to_csv(root / folder / "prefill.csv", index=False)


def _rows(tuned, cudnn, tuned_rounds="", cudnn_rounds="", clocks=((1800.0, "software power cap"), (1950.0, "none"))):
    # as a bench run writes them: a status per row (lab.results.data.TABLES; a table without one is broken)
    return [{"candidate": "ours-tuned", "n": 16384, "status": "ok", "ms": tuned, "ms_rounds": tuned_rounds,
             "sm_mhz": clocks[0][0], "clock_limit": clocks[0][1]},
            {"candidate": "sdpa-cudnn", "n": 16384, "status": "ok", "ms": cudnn, "ms_rounds": cudnn_rounds,
             "sm_mhz": clocks[1][0], "clock_limit": clocks[1][1]}]


def test_blocks_and_rounds_and_the_catalogue(tmp_path):
    _run(tmp_path, "h200/blocks/bench", _rows(3.7, 2.9))
    _run(tmp_path, "h200/blocks/run1", _rows(3.6, 3.3))
    _run(tmp_path, "h200/rounds", _rows(3.6, 3.2, "3.6 3.5 3.7", "3.2 2.9 3.3"), flags={"rounds": 3})
    _run(tmp_path, "h200/rounds-rep/run1", _rows(3.5, 3.1, "3.5 3.5 3.57", "3.1 3.0 3.4",
                                                 clocks=((1900.0, "software power cap"), (1960.0, "software power cap"))),
         flags={"rounds": 3})
    blocks = kernel_runs.stored_runs("h200/blocks", root=tmp_path)
    rounds = kernel_runs.stored_runs("h200/rounds", root=tmp_path) | {
        "repeat 1": kernel_runs.stored_runs("h200/rounds-rep", root=tmp_path)["repeat 1"]}
    spread = kernel_runs.block_and_round_spread(blocks, rounds)
    assert (spread["blocks_runs"], spread["ours_lo"], spread["ours_hi"], spread["fast_lo"], spread["fast_hi"]) == (
        2, 3.6, 3.7, 2.9, 3.3)
    assert (spread["rounds_runs"], spread["rounds_per_run"], spread["fast_round_lo"]) == (2, 3, 2.9)
    assert spread["fast_round_median"] == pytest.approx(3.15)          # median of 3.2 2.9 3.3 3.1 3.0 3.4
    assert spread["ours_round_spread_pct"] == pytest.approx(100 * (3.7 / 3.5 - 1))
    with pytest.raises(LabError, match="no prefill rows at n=32768"):
        kernel_runs.block_and_round_spread(blocks, rounds, n=32768)

    clocks = kernel_runs.clock_ranges(rounds).set_index("candidate")
    assert clocks.loc["ours-tuned"].to_dict() == {"mhz_lo": 1800.0, "mhz_hi": 1900.0, "power_capped": 2, "runs": 2}
    assert clocks.loc["sdpa-cudnn", "power_capped"] == 1

    catalogue = kernel_runs.run_catalogue(rounds, root=tmp_path)
    assert list(catalogue.run) == ["bench run", "repeat 1"]
    first = catalogue.iloc[0]
    assert (first.folder, first.date, first.code, first.rounds, first.seconds) == (
        "data/h200/rounds", "2026-11-30 08:00", "abc1234", 3, 10.0)
    assert math.isnan(kernel_runs.run_catalogue(blocks, root=tmp_path).rounds.astype(float).iloc[0])  # timed in blocks: no rounds


def test_race_table_gives_each_candidate_its_speed_against_fa3():
    prefill = pd.DataFrame([("fa3", 16384, "ok", 2.0), ("ours-tuned", 16384, "ok", 2.5), ("flex", 16384, "error", None)],
                           columns=["candidate", "n", "status", "ms"])
    table = kernel_runs.race_table(prefill, ["fa3", "ours-tuned", "flex", "absent"]).set_index("candidate")
    assert list(table.index) == ["fa3", "ours-tuned", "flex"]
    assert table.loc["ours-tuned", "vs_16384"] == pytest.approx(0.8)
    assert math.isnan(table.loc["flex", "ms_16384"]) and math.isnan(table.loc["flex", "vs_16384"])
    with pytest.raises(LabError, match="none of"):
        kernel_runs.race_table(prefill, ["absent"])


def test_an_out_of_memory_note_gives_its_allocation():
    assert kernel_runs.failed_allocation_gib("OutOfMemoryError: CUDA out of memory. Tried to allocate 128.00 GiB. GPU") == 128
    assert kernel_runs.failed_allocation_gib("Tried to allocate 512.00 MiB") == 0.5
    assert kernel_runs.failed_allocation_gib("RuntimeError: PassManager::run failed") is None


def test_the_sdpa_hook_probe_reads_each_implementation():
    console = "noise\nFA4 ok 0.0077\nFA3 FAILED ModuleNotFoundError No module named 'flash_attn_interface'\nTraceback"
    probe = kernel_runs.sdpa_hook_probe(console)
    assert probe["FA4"] == {"ok": True, "detail": 0.0077}
    assert probe["FA3"]["ok"] is False and "flash_attn_interface" in probe["FA3"]["detail"]
    with pytest.raises(LabError, match="sdpa-fa4"):
        kernel_runs.sdpa_hook_probe("nothing here")


def test_the_committed_console_says_the_fa4_hook_ran():
    from lab.results import data

    probe = kernel_runs.sdpa_hook_probe((data.DATA_DIR / "h200/device-logs/bandwidth-paged-race.txt").read_text())
    assert probe["FA4"]["ok"] and not probe["FA3"]["ok"]


def test_fa3_times_across_the_runs_of_one_day():
    times = kernel_runs.times_across_runs(16384)
    assert set(times) == {kernel_runs.RACE, kernel_runs.ABLATION, kernel_runs.TUNING_RACE}
    assert all(2 < ms < 4 for ms in times.values())


def test_the_decode_bar_divides_the_committed_times_and_bytes_by_the_one_ceiling():
    """data/h200/kernels stored bw_fraction over the copy rate (no read_ceiling_gbps): the book recomputes it over
    lab.results.bandwidth.ceiling from ms and bytes, under the bar's name of now, never reading the stored column."""
    from lab.measure import bench
    from lab.results import data
    from lab.results.bandwidth import ceiling

    assert (kernel_runs.READ_BAR, kernel_runs.COPY_BAR) == (bench.READ_BAR, bench.COPY_BAR)
    ds = data.load("h200/kernels")
    decode = ds.csv("decode.csv", ("candidate", "batch", "n", "status", "ms", "bytes", "bw_fraction"))
    assert "read_ceiling_gbps" not in decode          # the run of record is of before 2026-12
    row = decode[(decode.candidate == "ours-tuned") & (decode.n == 32768) & (decode.batch == 16)].iloc[0]
    expected = row.bytes / (row.ms * 1e-3) / ceiling(ds.gpu)
    bars = kernel_runs.run_bars(ds).set_index("bar")
    assert kernel_runs.COPY_BAR not in bars.index
    assert bars.loc[kernel_runs.READ_BAR, "ratio"] == pytest.approx(expected)
    assert abs(expected - row.bw_fraction) > 0.01      # the stored copy ratio is not what the book shows
    first = kernel_runs.run_bars(ds, "bars_first_call.csv").set_index("bar")
    assert math.isnan(first.loc[kernel_runs.READ_BAR, "ratio"])   # no decode table of its own: left empty


def test_read_fraction_is_bytes_over_time_over_the_ceiling():
    from lab.results.bandwidth import ceiling

    table = pd.DataFrame({"ms": [2.0], "bytes": [4e9]})
    assert kernel_runs.read_fraction(table, "NVIDIA H200").iloc[0] == pytest.approx(2e12 / ceiling("NVIDIA H200"))

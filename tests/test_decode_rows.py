"""lab.results.decode_rows: the sweep of decode against query rows per KV head, its roofline, its crossings."""

import math

import pandas as pd
import pytest

from lab import LabError, store
from lab.results import decode_rows, roofline


def _run(root, name, rows):
    folder = root / name
    store.write_csv(folder, "rows.csv", pd.DataFrame(rows, columns=decode_rows.COLUMNS))
    store.write_provenance(folder, store.new_provenance("kernels", flags={"experiment": "decode-rows"}))


def _point(cand, rows, ms, status="ok", note=""):
    flops, nbytes = 4.0 * rows * 1000, 4.0 * 1000
    return (cand, rows, 8, 32768, rows, 1, ms, flops, nbytes, flops / nbytes, flops / ms / 1e9, nbytes / ms / 1e6,
            status, note)


def test_the_first_run_wins_and_the_second_fills_its_gaps(tmp_path):
    _run(tmp_path, decode_rows.RUNS[0], [_point("fa3", 1, 0.1), _point("fa3", 2, 0.1), _point("fa3", 4, math.nan, "error")])
    _run(tmp_path, decode_rows.RUNS[1], [_point("fa3", 2, 0.5, note="eager (do_bench)"),
                                         _point("fa3", 4, 0.2, note="eager (do_bench)")])
    points = decode_rows.sweep(tmp_path).set_index("rows")
    assert list(points.index) == [1, 2, 4]
    assert points.loc[2, "ms"] == 0.1 and points.loc[2, "timer"] == "graph replay"
    assert points.loc[4, "run"] == decode_rows.RUNS[1] and points.loc[4, "timer"] == "eager"


def test_crossings_find_where_the_time_leaves_the_floor():
    points = pd.DataFrame([_point("k", r, ms) for r, ms in ((1, 0.10), (8, 0.105), (64, 0.109), (128, 0.2), (256, 0.4))],
                          columns=decode_rows.COLUMNS)
    roof = roofline.Roof("test", peak_flops=1e9, bandwidth=1e7)
    row = decode_rows.crossings(points, roof).iloc[0]
    assert row.last_flat == 64 and row.first_off == 128 and row.most_rows == 256
    assert row.most_pct_of_matmul == pytest.approx(100 * (4.0 * 256 * 1000 / 0.4e-3) / 1e9)


def test_no_run_on_file_is_an_error_that_names_the_command(tmp_path):
    with pytest.raises(LabError):
        decode_rows.sweep(tmp_path)


def test_the_committed_sweep_puts_fa3_past_the_measured_ridge():
    points, roof = decode_rows.sweep(), decode_rows.roof()
    assert 100 < roof.ridge < 250  # the H200's matmul rate over its read ceiling
    cross = decode_rows.crossings(points, roof).set_index("candidate")
    assert cross.loc["fa3", "most_rows"] > roof.ridge > cross.loc["fa3", "last_flat"]
    assert cross.loc["ours-tuned", "last_flat"] < cross.loc["fa3", "last_flat"]

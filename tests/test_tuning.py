"""lab.results.tuning: drift of an unchanged kernel, variants against the plain kernel of the same round."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from lab import LabError
from lab.results import tuning


def _table():
    rows = [
        (1, "prefill 16k", "sdpa CUDNN_ATTENTION (start)", "", "", 3.00, ""),
        (1, "prefill 16k", "tuned 128x64 w8 s3", "plain", True, 4.00, ""),
        (1, "prefill 16k", "tuned 64x64 w4 s3", "plain", False, 3.60, ""),
        (1, "prefill 16k", "tuned 64x64 w4 s3", "fancy", False, 4.50, ""),
        (1, "prefill 16k", "tuned 128x64 w4 s3", "fancy", True, math.nan, "CompilationError: at 1:2"),
        (1, "prefill 16k", "sdpa CUDNN_ATTENTION (end)", "", "", 3.06, ""),
        (2, "prefill 16k", "sdpa CUDNN_ATTENTION (start)", "", "", 2.90, ""),
        (2, "prefill 16k", "tuned 64x64 w4 s3", "plain", True, 3.20, ""),
        (2, "prefill 16k", "sdpa CUDNN_ATTENTION (end)", "", "", 2.90, ""),
    ]
    return pd.DataFrame(rows, columns=["round", "shape", "setting", "variant", "tma", "ms", "note"])


def test_drift_is_the_largest_start_to_end_change_of_the_reference():
    assert tuning.drift_pct(_table()) == pytest.approx(2.0)
    with pytest.raises(LabError, match="start"):
        tuning.drift_pct(_table()[~_table().setting.str.endswith("(end)")])


def test_variants_compare_within_a_round():
    table = tuning.variants(_table()).set_index(["round", "variant"])
    fancy = table.loc[(1, "fancy")]
    assert fancy.best_ms == 4.5 and fancy.plain_ms == 3.6           # round 1's plain best, not round 2's
    assert fancy.tried == 2 and fancy.failed == 1 and fancy.failure == "CompilationError"
    assert fancy.vs_plain == pytest.approx(0.8) and fancy.vs_reference == pytest.approx(3.0 / 4.5)
    assert table.loc[(2, "plain")].best_setting == "64x64 w4 s3 tma=1"
    with pytest.raises(LabError, match="prefill 32k"):
        tuning.variants(_table(), "prefill 32k")


def test_change_pct_is_positive_when_faster():
    assert tuning.change_pct(4.0, 3.0) == pytest.approx(100 / 3)
    assert tuning.change_pct(3.0, 4.0) == pytest.approx(-25.0)
    assert math.isnan(tuning.change_pct(math.nan, 3.0)) and math.isnan(tuning.change_pct(3.0, 0.0))


def test_log_rows_turn_a_tuning_log_into_table_rows():
    lines = ['{"shape": "prefill 16k", "label": "sdpa CUDNN_ATTENTION (start)", "ms": 3.3, "err": 0.004, "note": "",'
             ' "sm_mhz": 1980.0, "clock_limit": "none"}',
             '',
             '{"shape": "prefill 16k", "label": "128x64 w8 s2 r128 tma=1", "ms": 3.65, "err": 0.004, "note": "",'
             ' "launch": [128, 64, 8, 2, 128], "tma": true, "registers": 127, "spills": 0, "shared_kib": 96.0,'
             ' "programs_per_sm": 2, "sm_mhz": 1965.0, "clock_limit": "software power cap"}']
    reference, launch = tuning.log_rows(lines, 3, "abc1234")
    assert reference["setting"] == "sdpa CUDNN_ATTENTION (start)" and reference["variant"] == "" and reference["registers"] == ""
    assert launch["setting"] == "tuned 128x64 w8 s2 r128" and launch["tma"] is True and launch["variant"] == "plain"
    assert launch["programs_per_sm"] == 2 and launch["round"] == 3 and launch["code"] == "abc1234"
    assert set(launch) == set(tuning.TABLE_COLUMNS)


def test_log_rows_name_a_broken_line():
    with pytest.raises(LabError, match="line 2"):
        tuning.log_rows(['{"shape": "prefill 16k", "label": "x", "ms": 1}', '{"shape": "pre'], 3, "abc1234")


def test_register_cap_pairs_match_launches_of_the_same_round_and_loads():
    cols = ["round", "shape", "setting", "variant", "tma", "ms", "registers", "spills", "programs_per_sm"]
    rows = [
        (3, "prefill 16k", "sdpa CUDNN_ATTENTION (start)", "", "", 3.2, None, None, None),
        (3, "prefill 16k", "tuned 128x64 w8 s2", "plain", False, 4.8, 184, 0, 1),
        (3, "prefill 16k", "tuned 128x64 w8 s2 r128", "plain", False, 3.7, 128, 22, 2),
        (3, "prefill 16k", "tuned 128x64 w8 s2", "plain", True, 4.7, 144, 0, 1),
        (3, "prefill 16k", "tuned 128x64 w8 s2 r128", "plain", True, 3.5, 127, 0, 2),
        (4, "prefill 16k", "tuned 64x64 w4 s3 r128", "plain", True, 4.4, 127, 0, 2),   # no uncapped twin in round 4
        (1, "prefill 16k", "tuned 128x64 w8 s3", "plain", True, 3.9, None, None, None),  # before resources were kept
    ]
    pairs = tuning.register_cap_pairs(pd.DataFrame(rows, columns=cols))
    assert list(pairs.tma) == [False, True]
    first = pairs.iloc[0]
    assert (first.launch, first.cap, first.programs_per_sm, first.programs_per_sm_capped) == ("128x64 w8 s2", 128, 1, 2)
    assert first.speedup == pytest.approx(4.8 / 3.7) and first.spills_capped == 22


def test_register_cap_pairs_without_pairs_says_so():
    cols = ["round", "shape", "setting", "variant", "tma", "ms", "registers", "spills", "programs_per_sm"]
    table = pd.DataFrame([(3, "prefill 16k", "tuned 64x64 w4 s3", "plain", True, 4.0, 141, 0, 2)], columns=cols)
    with pytest.raises(LabError, match="register cap"):
        tuning.register_cap_pairs(table)


def test_step_changes_compare_each_step_with_the_one_before_at_each_length():
    times = ((16384, [10.0, 9.0, 8.9, 8.0]), (32768, [40.0, 39.5, 35.0, 30.0]))
    ablation = pd.DataFrame([(n, step, f"change {step}", ms) for n, ms_list in times for step, ms in enumerate(ms_list)],
                            columns=["n", "step", "change", "ms"]).sample(frac=1, random_state=0)  # any row order
    table = tuning.step_changes(ablation, 2.0).set_index(["n", "step"])
    assert len(table) == 6 and table.loc[(16384, 1), "change"] == "change 1"
    assert table.loc[(16384, 1), "change_pct"] == pytest.approx(100 * (10 / 9 - 1))
    assert table.loc[(32768, 3), "change_pct"] == pytest.approx(100 * (35 / 30 - 1))
    # 16k: +11%, +1%, +11%; 32k: +1%, +13%, +17%
    assert [bool(table.loc[(16384, s), "beyond_drift"]) for s in (1, 2, 3)] == [True, False, True]
    assert [bool(table.loc[(32768, s), "beyond_drift"]) for s in (1, 2, 3)] == [False, True, True]
    with pytest.raises(LabError, match="ablation table is empty"):
        tuning.step_changes(ablation.iloc[0:0], 2.0)


def test_a_step_tried_and_not_kept_is_measured_against_the_last_kept_step():
    rows = [(16384, 0, "teaching", 10.0), (16384, 1, "+ kept", 8.0),
            (16384, 2, f"+ a {tuning.NOT_KEPT}", 9.0), (16384, 3, f"+ b {tuning.NOT_KEPT}", 7.0)]
    table = tuning.step_changes(pd.DataFrame(rows, columns=["n", "step", "change", "ms"]), 2.0).set_index("step")
    assert list(table.after_step) == [0, 1, 1]
    assert table.loc[3, "change_pct"] == pytest.approx(100 * (8 / 7 - 1))   # against step 1, not step 2


def test_race_best_is_the_fastest_variant_against_fa3_of_the_same_race():
    race = pd.DataFrame([(16384, "fa3", "ok", 3.0), (16384, "a", "ok", 4.0), (16384, "b", "ok", 3.5),
                         (16384, "c", "error", float("nan")), (16384, "fa4", "error", float("nan"))],
                        columns=["n", "variant", "status", "ms"])
    best = tuning.race_best(race).iloc[0]
    assert best.variant == "b" and best.vs_reference == pytest.approx(3.0 / 3.5)
    assert best.variants == 3 and best.failed == 1
    with pytest.raises(LabError, match="no timed variant"):
        tuning.race_best(race[race.variant != "fa3"])


def _hopper_race():
    """FA3, two kernels and a failed one; everything four times slower at 32k."""
    rows = [(n, name, "ok", ms * (4 if n == 32768 else 1), 0.01) for n in (16384, 32768)
            for name, ms in (("fa3", 3.0), ("gluon", 3.2), ("triton", 3.6))]
    rows.append((16384, "broken", "error", float("nan"), float("nan")))
    return pd.DataFrame(rows, columns=["n", "variant", "status", "ms", "max_abs_err"])


def test_race_vs_is_fa3s_time_over_each_variants_in_the_order_given():
    table = tuning.race_vs(_hopper_race(), ["triton", "gluon"])
    assert list(table.variant[table.n == 16384]) == ["triton", "gluon"]
    row = table[(table.n == 32768) & (table.variant == "gluon")].iloc[0]
    assert row.vs_reference == pytest.approx(12.0 / 12.8)


def test_race_vs_refuses_a_variant_that_was_not_timed():
    with pytest.raises(LabError, match="no timed 'broken' at n=16384"):
        tuning.race_vs(_hopper_race(), ["gluon", "broken"])

"""Chapter 4's hand-scheduled kernel: the facts come from the run of record, each from the same race row."""

import pytest

from lab.book import hopper_facts
from lab.results import data


def test_the_run_of_record_meets_the_target_at_both_lengths():
    race = data.load(hopper_facts.RACE).csv("race.csv", ("n", "variant", "status", "ms"))
    facts = hopper_facts.facts()
    for n in (16384, 32768):
        at = race[race.n == n].set_index("variant").ms
        assert facts[f"hk_vs_{n // 1024}k"].value == pytest.approx(at["fa3"] / at[hopper_facts.DEFAULT])
        assert facts[f"hk_vs_{n // 1024}k"].value >= hopper_facts.TARGET   # what chapter 4 says of this run


def test_counters_of_fa3_and_ours_come_from_one_run():
    facts = hopper_facts.counter_facts()
    assert {"hk_fa3_tensor", "hk_ours_tensor", "hk_fa3_programs", "hk_ours_programs"} <= set(facts)
    assert {facts[key].source for key in facts} == {f"data/{hopper_facts.COUNTERS}/raw.csv (Nsight Compute on the H200)"}


def test_step_table_has_a_row_per_step_and_both_lengths():
    rows, _ = hopper_facts.race_table()
    table = hopper_facts.step_table(rows).data
    assert list(table.kernel) == list(hopper_facts.STEPS.values())
    assert {"16k: speed vs FA3", "32k: speed vs FA3", "16k: ms", "32k: ms"} <= set(table.columns)


def test_what_chapter_4_says_of_the_schedule_holds_on_the_run_of_record():
    """The prose: the overlap beats the drift at 16k; every ping-pong change (with and without the overlap) is
    inside it; the structure alone is most of the way from the Triton kernel."""
    from lab.results import tuning
    from lab.results.kernel_runs import RECORD

    drift = tuning.drift_pct(data.load(RECORD).csv("tuning_forward.csv", ("round", "shape", "setting", "ms")))
    facts = hopper_facts.facts()
    assert facts["hk_overlap_pct_16k"].value > drift
    for key in ("hk_pingpong_pct_16k", "hk_pingpong_pct_32k", "hk_pingpong_alone_pct_16k", "hk_pingpong_alone_pct_32k"):
        assert abs(facts[key].value) < drift, key
    for k in ("16k", "32k"):
        triton, neither, full = (facts[key].value for key in (f"hk_triton_vs_{k}", f"hk_neither_vs_{k}", f"hk_vs_{k}"))
        assert neither - triton > full - neither

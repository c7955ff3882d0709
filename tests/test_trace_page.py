"""Chapter 7's page module (lab.book.pages.ch07): every fact the chapter glues, named where it comes from data,
the claims its prose makes about the census and the clock samples held to the data, tables a reader can read."""

from __future__ import annotations

import json
import re

import pytest

from lab import REPO_ROOT
from lab.book.pages import ch07, declared
from lab.measure.gpuclocks import readings_held, samples_with
from lab.results import census_windows as cd
from lab.results import clock_probe

TRACES = REPO_ROOT / "data" / ch07.TRACES_RUN / "traces"


@pytest.fixture(scope="module")
def facts():
    return ch07.facts()


def test_every_number_from_data_is_a_declared_quantity_of_its_run(facts):
    names = set(declared())
    for name, fact in facts.items():
        if fact.source.startswith("data/") and isinstance(fact.value, (int, float)):
            assert fact.quantity, f"{name}: a number from {fact.source} without a quantity"
            assert fact.quantity.split("[")[0] in names, f"{name}: {fact.quantity} is not declared"
            # the traces, the A10G study, and the clock probe that says what the power-cap flag means
            assert fact.run in (ch07.TRACES_RUN, ch07.A10G_RUN, clock_probe.RUN), (name, fact.run)


def test_the_controls_hold_on_the_a10g_and_fail_on_the_h200(facts):
    assert facts["a10g_mm28_diff_pct"].value < facts["control_tolerance"].value
    assert facts["h200_mm28_diff_pct"].value > facts["control_tolerance"].value
    assert facts["h200_control_verdict"].value == "beyond"
    assert facts["h200_same_launches"].value.startswith("the same")
    assert 0 < facts["h200_slower_min"].value < facts["h200_slower_max"].value


def _series(arm: str, window: str) -> dict:
    return json.loads((TRACES / arm / f"{window}.clocks.json").read_text())


def test_the_power_story_reads_what_the_samples_hold(facts):
    """What the chapter says of the clock samples, read again from the files with the sampler's helpers."""
    fa = [json.loads(p.read_text()) for p in sorted((TRACES / "flash_attn-fa3").glob("*.clocks.json"))]
    fx = [json.loads(p.read_text()) for p in sorted((TRACES / "flex_attention").glob("*.clocks.json"))]
    assert facts["clock_fa_capped"].value == facts["clock_fa_samples"].value == sum(r["samples"] for r in fa)
    assert facts["clock_fx_capped"].value == sum(samples_with(r, "software power cap") for r in fx)
    assert facts["clock_fx_capped"].value < facts["clock_fx_samples"].value / 10
    # a window shorter than a second reads the average of the second before it; the long window catches up
    assert facts["clock_fa_2k_window_ms"].value < 1000 and facts["clock_fa_2k_samples"].value == 1
    assert facts["clock_fa_2k_w"].value < facts["clock_fa_8k_w"].value < facts["clock_fa_28k_w"].value / 2
    # the 8k window's clock is below the 28k window's median; the 28k readings open high, dip, then settle
    assert facts["clock_fa_8k_mhz"].value < facts["clock_fa_28k_mhz"].value
    assert facts["clock_fa_28k_first"].value > facts["clock_fa_28k_mhz"].value > facts["clock_fa_28k_min"].value
    long = _series("flash_attn-fa3", "prefill-28672")["series"]["sm_mhz"]
    assert long.index(min(long)) < len(long) // 3          # the dip comes early in the window
    # FlexAttention's prefill windows stayed at one clock, with no flag
    for window in ("prefill-2048", "prefill-8192", "prefill-28672"):
        record = _series("flex_attention", window)
        assert samples_with(record, "software power cap") == 0
        assert record["sm_mhz"]["min"] == record["sm_mhz"]["max"] == facts["clock_fx_28k_max_mhz"].value
    # a reading lasts longer than one sample
    assert facts["clock_readings_held"].value > 1
    assert readings_held(_series("flash_attn-fa3", "prefill-28672")) == facts["clock_readings_held"].value


def test_decode_windows_are_graph_replayed_and_prefill_windows_are_not(facts):
    for tag in ("fa", "fx"):
        assert facts[f"graph_{tag}_d2k_replayed"].value > 0.8 * facts[f"graph_{tag}_d2k_kernels"].value
    assert facts["graph_prefill_replayed"].value == 0


def test_the_naive_window_is_mostly_prefill(facts):
    for tag in ("fa", "fx"):
        assert facts[f"naive_{tag}_prefill_pct"].value > 80 and facts[f"naive_{tag}_decode_pct"].value < 20
        assert facts[f"h200_naive_{tag}_prefill_pct"].value > 50
    assert facts["naive_fa_s"].unit == "s"


@pytest.mark.parametrize("table", ["name_rule_table", "rule_table", "launch_table", "clock_table",
                                   "decode_signature_table"])
def test_tables_have_headers_and_no_raw_python(table):
    html = getattr(ch07, table)().to_html()
    assert "<th" in html and "nan" not in html.lower().replace("nanoseconds", "")
    assert not re.search(r'<th[^>]*class="row_heading', html), f"{table} shows an index column"


def test_the_clock_table_lists_every_window_with_its_flag_count():
    table = ch07.clock_table().data
    clocks = cd.window_clocks()
    assert len(table) == len(clocks[clocks.gpu == "H200"])
    assert all(re.fullmatch(r"\d+ of \d+", cell) for cell in table["with the power cap"])


def test_the_trace_the_chapter_opens_is_on_file():
    assert ch07.trace_file().exists() and ch07.trace_file().name == "prefill-2048.trace.json.gz"

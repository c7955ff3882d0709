"""The interview's and the course kit's facts: the teaching pages' facts quoted from the fact registry as those
pages glued them (every chapter under its own glue names), the answers' derivations from them; what only those
pages state of chapter 6's runs (lab.book.pages.ch06.later) checked against the files; the claims the pages make
on them; and the course kit's slide ranges and print views."""

import csv
import json
import re

import pytest

from lab import REPO_ROOT, LabError
from lab.book import fact_registry, quizzes, quoted
from lab.book.facts import NOT_MEASURED, Fact, glue_all, glued_value
from lab.book.pages import ch01, ch02, ch06, ch06b, ch06c, course_kit, interview
from lab.book.pages.ch06 import later
from lab.book.quiz import Cited
from lab.names import label
from lab.results import bandwidth, dram_bytes, roofline, sweeps
from lab.results.reference import DATASET as A10G


def _raw(table: str, **where) -> dict:
    with open(REPO_ROOT / "data" / A10G / table, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if all(r[k] == str(v) for k, v in where.items())]
    assert len(rows) == 1, where
    return rows[0]


@pytest.fixture(scope="module")
def facts():
    return later.facts()


@pytest.fixture(scope="module")
def chapter6():
    return {k: v.value for k, v in ch06.facts().items()}


def test_every_fact_has_a_source_and_no_sentence(facts):
    for name, fact in facts.items():
        assert isinstance(fact, Fact) and fact.source.strip(), name
        if fact.measured and isinstance(fact.value, str):  # text values are names and flags, not prose
            assert len(fact.value.split()) <= 4, f"{name} reads like a sentence: {fact.value!r}"


def test_a10g_facts_match_the_files(chapter6):
    f = chapter6
    short, long = f["a10g_short_target"], f["a10g_longest"]  # the rows are keyed by the lengths asked for
    ttft = lambda arm, n: float(_raw("sweep.csv", arm=arm, target_len=n)["ttft_s"])
    itl = lambda arm, n: float(_raw("sweep.csv", arm=arm, target_len=n)["itl_ms"])
    assert f["a10g_ttft_long_ratio"] == pytest.approx(ttft("FLEX_ATTENTION", long) / ttft("FLASH_ATTN", long))
    assert f["itl_ratio_long"] == pytest.approx(itl("FLEX_ATTENTION", long) / itl("FLASH_ATTN", long))
    assert f["itl_flex_extra_ms"] == pytest.approx(itl("FLEX_ATTENTION", long) - itl("FLEX_ATTENTION", short))
    assert f["a10g_fa_c"] == pytest.approx(float(_raw("fits.csv", arm="FLASH_ATTN")["c_ps_per_token2"]), rel=1e-3)
    # hand check of the model: the floor grows by the extra KV (57,344 bytes per token) over 600 GB/s
    # at the tokens the prompts had: the shortest one token past its target, the longest at it
    tokens = lambda n: int(_raw("sweep.csv", arm="FLASH_ATTN", target_len=n)["actual_len"])  # noqa: E731
    assert f["floor_extra_ms"] == pytest.approx((tokens(long) - tokens(short)) * 57344 / 600e9 * 1e3, rel=1e-9)


def test_the_kv_read_rate_is_the_slope_chapter_6_uses(chapter6):
    """One estimate of a KV read rate everywhere: lab.results.sweeps.kv_read_rate's slope."""
    table = sweeps.sweep_table()
    rate = sweeps.kv_read_rate(table, A10G, "FLASH_ATTN")["kv_gb_per_s"]
    assert chapter6["a10g_fa_kv_rate"] == pytest.approx(rate)
    assert chapter6["a10g_fa_kv_pct"] == pytest.approx(100 * rate * 1e9 / bandwidth.ceiling("A10G"))


def test_the_claims_chapter_08_makes_hold_on_the_data(chapter6):
    f = chapter6
    # the split-KV decode kernel pulls most of the bandwidth on the extra KV bytes; vLLM's Flex path a small part
    assert f["a10g_fa_kv_pct"] > 50 > 20 > f["a10g_flex_kv_pct"]
    # Q6: between the two backends the decode ratio is the larger; a whole request lies between the two
    assert f["itl_ratio_long"] > f["a10g_ttft_long_ratio"]
    assert f["a10g_ttft_long_ratio"] < f["request_ratio_long"] < f["itl_ratio_long"]


def test_the_claims_on_chapter_ones_facts_hold():
    """Q1 and Exercise 11: at chapter 1's length the re-read count lands left of the H100's datasheet ridge, the
    compulsory count far right of it; Q5: a decode matmul does about one FLOP per weight byte."""
    f = {k: v.value for k, v in ch01.facts().items()}
    assert f["flash_reread_ai"] < f["h100_ridge_datasheet"] < f["flash_comp_ai"]
    assert f"{f['dec_ai']:.1f}" == "1.0" and f["weights_streamed_gb"] < f["weights_gb"]


def test_the_stopwatch_is_chapter_twos_check_with_its_thin_margin():
    """Q1 and Exercise 11 state chapter 2's stopwatch check (chk_*), not a second read of the benchmark."""
    from lab.results import fused_bound

    f = ch02.facts()
    if not f["chk_ms"].measured:
        pytest.skip("no H200 kernel benchmark committed")
    # the same method, not a copy: chk_kernel is the fastest candidate's display name (lab.names), so the
    # check is run on the candidate itself
    n = f["chk_n"].value
    candidate = fused_bound.fastest_candidate(n)
    assert f["chk_kernel"].value == label(candidate)
    check = fused_bound.h200_kernel_check(candidate, n)
    assert f["chk_ms"].value == check["ms"] and f["chk_reread_ms"].value == check["reread_ms"]
    # the book says the margin is thin and flips at the datasheet bandwidth: the data must keep saying so
    assert 0 < f["chk_margin_pct"].value < 20 and f["chk_reread_ds_ms"].value < f["chk_ms"].value
    assert f["chk_ceiling_tbs"].quantity == "bandwidth_ceiling[h200]"  # the one ceiling, not the run's copy
    taken = set(interview.TAKEN["book/02-naive-attention"])
    assert {"chk_n", "chk_kernel", "chk_ms", "chk_reread_ms", "chk_margin_pct", "chk_ceiling_tbs", "chk_ds_tbs",
            "chk_reread_ds_ms"} <= taken


def test_facts_with_a_format_format_themselves_or_say_not_measured(monkeypatch):
    import myst_nb

    glued = {}
    monkeypatch.setattr(myst_nb, "glue", lambda name, value, display=True: glued.__setitem__(name, value))
    glue_all({"a": Fact(8192, "x", ",d"), "b": Fact(None, "y", ".1f"), "c": Fact(float("nan"), "z", ".1f"),
              "d": Fact(1.5, "w")})
    assert glued == {"a": "8,192", "b": NOT_MEASURED, "c": NOT_MEASURED, "d": 1.5}


# --- the studies that land later: not measured until their files exist, then read by value ---------

def test_the_batch_claims_chapter_08_makes_hold_on_the_committed_sweep(chapter6):
    """Q19: at 32k decode turns KV-bound between two measured concurrencies and FA3's ITL closes in on the floor as
    the batch grows; at 2k the step stays weight-bound up to 64 requests while throughput grows many-fold."""
    f = chapter6
    if f["batch_1_fa_itl"] is None:
        pytest.skip("no concurrency sweep committed")
    assert f["kv_bound_below_32k"] < f["batch_kv_bound_long"] <= f["kv_bound_from_32k"]
    ratios = [f[f"batch_{c}_fa_x_floor"] for c in (1, 4, 16, 64)]
    assert ratios == sorted(ratios, reverse=True) and ratios[-1] < 1.2 and ratios[0] > 1.2
    assert f["batch_kv_bound_short"] > 64 and f["conc_fa3_2k_64"] < 1.5 * f["conc_fa3_2k_1"]
    assert f["conc_fa3_2k_tok_s_gain"] > 30
    assert f["batch_flex_top_n"] >= 4 and f["batch_flex_top_x_floor"] > 10


def test_the_dram_claims_hold_on_the_committed_runs():
    """Q1, Q23 and Exercise 11 quote chapter 2's DRAM bytes at 32k: between the two counts, right of the H200's
    measured ridge; and cuDNN's at 4k below the compulsory count."""
    table = dram_bytes.load()
    ours, cudnn = dram_bytes.row(table, "ours-tuned", 32768), dram_bytes.row(table, "sdpa-cudnn", 4096)
    if ours is None or cudnn is None:
        pytest.skip("no DRAM bytes committed")
    assert ours["compulsory_bytes"] <= ours["measured_bytes"] < ours["reread_bytes"] / 10
    assert ours["intensity_measured"] > roofline.measured_ridge().value
    assert cudnn["measured_bytes"] < cudnn["compulsory_bytes"]


def test_the_flex_template_claim_chapter_08_makes_holds_on_the_committed_counters():
    """Flex's decode template, handed a real block mask, against the general kernel: the ratio quoted is the two
    times' ratio, and the template is the faster one (the claim of chapters 05b, 06 and 08)."""
    from lab.results import flex_counters as fc

    rows = {(r["candidate"], r["batch"]): r for r in fc.table()}
    general, template = rows.get(("flex-default", 1)), rows.get(("flex-pad8-mask", 1))
    if general and template:
        speedup = later.flex_facts()["flex_ctr_template_speedup_b1"].value
        assert speedup == pytest.approx(general["ms"] / template["ms"]) and speedup > 1


# --- chapter 6's self-check: its H200 questions quote the chapter's facts, and wait for the sweep ---------------

def _h200_sweep_questions() -> list:
    """The questions of chapter 6's self-check that cite its H200 sweep's facts."""
    return [q for q in quizzes.module_of("06-vllm-sweeps").questions()
            if any(isinstance(n, Cited) and (n.fact.quantity or "").startswith("h200.sweep.") for n in q.cites.values())]


def test_h200_sweep_questions_quote_chapter_six_and_switch_off_without_the_sweep(monkeypatch):
    facts = ch06.facts()
    if not facts["h200_ttft_fa2"].measured:
        pytest.skip("no H200 sweep committed")
    asked = _h200_sweep_questions()
    assert len(asked) == 2
    for question in asked:
        question.validate()
    fa3, fa2 = facts["h200_ttft_fa3_fa2_len"].value, facts["h200_ttft_fa2"].value
    assert f"{fa3:.2f} s with FlashAttention 3 and {fa2:.2f} s" in asked[0].render().prompt  # the chapter's numbers
    # the sweep not on file: its facts say "not measured yet", and the questions on it are not asked
    unmeasured = {name: Fact(None, fact.source) if (fact.quantity or "").startswith("h200.sweep.") else fact
                  for name, fact in facts.items()}
    monkeypatch.setattr(ch06, "facts", lambda: unmeasured)
    assert _h200_sweep_questions() == []


def test_format_templates_carry_the_unit():
    assert Fact(2.345, "x", "{:.1f}×").text().value == "2.3×"
    assert Fact(8192, "x", "{:,d} tokens").text().value == "8,192 tokens"
    assert Fact(None, "x", "{:.1f}×").text().value is None


# --- a later page quotes the teaching pages' facts (lab.book.quoted) -------------------------------------

def _registry(tmp_path, page: str, facts: dict) -> None:
    """A registry folder holding ``page``'s glued ``facts``, as lab.book.fact_registry writes it during a build."""
    body = {"page": page, "facts": [fact_registry.entry(page, name, fact, glued_value(fact)).__dict__
                                    for name, fact in facts.items()]}
    path = tmp_path / f"{page}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(body))


def test_a_quoted_fact_is_glued_as_its_teaching_page_glued_it(tmp_path):
    from lab.results.quantities import Quantity

    speed = Quantity("h200.test.speed", "a planted speed", run="h200/kernels-race", file="prefill.csv", unit="×")
    glued = {"raw": speed.fact(0.8118, "16k"), "text": speed.fact(0.9717, "32k").shown_as("{:.0%}"),
             "word": Fact("sdpa-cudnn", "data/h200/flex-masks/masks.csv")}
    _registry(tmp_path, "book/04-x", glued)
    got = quoted.quoted({"book/04-x": ("raw", "text", "word")}, folder=tmp_path)
    for name, fact in glued.items():
        assert glued_value(got[name]) == glued_value(fact), name     # the same text on both pages
        assert (got[name].quantity, got[name].source, got[name].run) == (fact.quantity, fact.source, fact.run)
    assert f"{got['raw'].value:.2f}" == "0.81"                        # a raw number keeps taking a format spec
    with pytest.raises(LabError, match="book/04-x: missing"):
        quoted.quoted({"book/04-x": ("missing",)}, folder=tmp_path)


def _planted_taken() -> dict:
    """The taught facts the interview's derivations start from, with planted values."""
    return {"kv_kb": Fact(56.0, "x"), "kv_gb_32k": Fact(1.879, "x"), "group": Fact(7, "x"), "head_dim": Fact(128, "x"),
            "weights_streamed_gb": Fact(14.14, "x")}


def test_the_answers_derive_the_kv_cache_from_the_taught_facts():
    """The KV figures the answers state and no chapter does are computed from the taught facts (chapter 2's KiB
    per token and group, chapter 5b's cache at 32k), each a quantity of the interview page with no data run."""
    f = interview.derived(_planted_taken())
    per_token = 2 * 4 * 128 * 2 * 28  # K and V, 4 KV heads, d = 128, bf16, 28 layers: 56 KiB
    assert f["kv_mha_gb_32k"].value == pytest.approx(7 * 1.879)
    assert f["kv_equals_weights_tokens"].value == pytest.approx(14.14e9 / per_token)
    assert f["page_kib_per_head"].value == 4
    assert all(fact.quantity and not fact.run.startswith("h200/") for fact in f.values())


def test_chapters_one_to_three_are_quoted_under_their_own_glue_names():
    """What the interview and the course kit take from chapters 1 and 2 is glued there under that name, and the
    interim names those pages replaced are gone from both pages."""
    import re

    for page, module in (("book/01-roofline", ch01), ("book/02-naive-attention", ch02)):
        assert set(interview.TAKEN[page]) <= set(module.facts()), page
        assert set(course_kit.TEACHING[page]) - {"my_machine", "my_flops", "my_bw", "my_ridge", "my_dtype"} \
            <= set(module.facts()), page
    gone = ("ridge_h100", "ridge_a10g", "ridge_h200", "h100_tb_s", "h200_tb_s", "a10g_gb_s", "a10g_mem_gb",
            "kv_kb_per_token", "decode_intensity", "qk_intensity_cap", "sp_gb_layer_long", "naive_max_len_a10g",
            "intensity_compulsory_long", "intensity_reread_long", "crossover_len", "dram_len", "sw_len", "sw_ms")
    for chapter in ("08-interview-prep", "09-course-kit"):
        names = set(re.findall(r"\{glue(?::\w+)?\}`([^`:]+)", (REPO_ROOT / "book" / f"{chapter}.md").read_text()))
        assert not names & set(gone), f"{chapter}: {sorted(names & set(gone))}"


def test_every_number_only_later_pages_state_of_chapter_6s_runs_is_named(facts):
    for name, fact in facts.items():
        if isinstance(fact.value, (int, float)) and not isinstance(fact.value, bool):
            assert fact.quantity, f"{name}: {fact.value!r} from {fact.source} has no quantity"


def test_the_interview_takes_each_name_once_from_the_page_that_glues_it():
    taught = [name for names in interview.TAKEN.values() for name in names]
    assert len(set(taught)) == len(taught), "a name taken from two pages"
    for page, module in (("book/06-vllm-sweeps", ch06), ("book/06b-busy-server", ch06b),
                         ("book/06c-our-kernels-in-vllm", ch06c)):
        assert set(interview.TAKEN[page]) <= set(module.facts()), page
        assert set(course_kit.TEACHING.get(page, ())) <= set(module.facts()), page
    assert not hasattr(interview, "INTERIM") and not hasattr(course_kit, "FROM_INTERVIEW")


def test_a_number_shown_in_another_format_is_a_bare_number_of_its_page():
    """SHOWN reformats only what a teaching page glued as a bare number (a text would lose its page's words)."""
    glued = {**ch06.facts(), **ch06b.facts()}
    for name, fmt in interview.SHOWN.items():
        assert isinstance(glued[name].value, (int, float)) and not glued[name].fmt, name
        assert Fact(glued[name].value, "x", fmt).text().value, name


def test_the_chapters_renamed_in_the_interview_are_gone_from_its_markdown():
    """The interview's old names of chapter 6's quantities (issue 32): the chapter's glue names replace them."""
    gone = ("itl_flash_short", "h200_flex_kv_gb_s", "race_flex_vs_cudnn_16k", "b_flash", "c_flex", "kv_bw_flash_gb_s",
            "conc_fa3_32k_1", "flex_ctr_gap_b1", "h200_gb_s", "floor_gb_s", "a10g_long_len", "chunk_a10g")
    for chapter in ("08-interview-prep", "09-course-kit"):
        names = set(re.findall(r"\{glue(?::\w+)?\}`([^`:]+)", (REPO_ROOT / "book" / f"{chapter}.md").read_text()))
        assert not names & set(gone), f"{chapter}: {sorted(names & set(gone))}"


def test_flex_loses_to_cudnn_on_plain_causal_in_the_race_of_record():
    """Q20 and Exercise 9: on plain causal SDPA's cuDNN backend (is_causal=True) is faster than Flex (issue 32)."""
    from lab.book.pages import ch04

    f = ch04.facts()
    flex, cudnn = f["race_flex_vs_fa3_16k"].value, f["race_cudnn_vs_fa3_16k"].value
    assert flex < cudnn and 0.5 < flex / cudnn < 0.9


# --- the course kit's plans: slide ranges counted from the decks, two printable views ----------------------

def _toy_deck(monkeypatch):
    import nbformat

    cells = [nbformat.v4.new_markdown_cell("# Title\n\nopening"), nbformat.v4.new_markdown_cell("## One\n\ntext"),
             nbformat.v4.new_markdown_cell("more of one"), nbformat.v4.new_markdown_cell("## Two\n\ntext"),
             nbformat.v4.new_markdown_cell("## Three\n\ntext")]
    kinds = ["-", "slide", "slide", "slide", "slide"]
    notes = nbformat.v4.new_markdown_cell("speaker notes")
    notes.metadata["slideshow"] = {"slide_type": "notes"}
    for cell, kind in zip(cells, kinds, strict=True):
        cell.metadata["slideshow"] = {"slide_type": kind}
    deck = nbformat.v4.new_notebook(cells=[cells[0], cells[1], notes, *cells[2:]])
    monkeypatch.setattr(course_kit.slides, "load_chapter", lambda stem: (deck, {}))
    monkeypatch.setattr(course_kit.slides, "to_slides_notebook", lambda nb, glue: nb)
    course_kit.deck_outline.cache_clear()


def test_slide_ranges_are_counted_as_reveal_numbers_the_slides(monkeypatch):
    _toy_deck(monkeypatch)
    assert course_kit.deck_outline("toy") == ((1, "Title"), (2, "One"), (4, "Two"), (5, "Three"), (6, ""))
    assert course_kit.slide_range("toy", "One", "Two") == (2, 4)
    assert course_kit.slide_range("toy", "Three", "Three") == (5, 5)
    with pytest.raises(LabError, match="no section 'Four'"):
        course_kit.slide_range("toy", "One", "Four")
    course_kit.deck_outline.cache_clear()


def test_each_plan_segment_names_its_deck_and_the_plans_show_them():
    text = (REPO_ROOT / "book" / "09-course-kit.md").read_text(encoding="utf-8")
    for name, (stem, first, last) in course_kit.SEGMENTS.items():
        assert f"{{glue:text}}`{name}`" in text, f"the plans never show segment {name}"
        source = (REPO_ROOT / "book" / f"{stem}.md").read_text(encoding="utf-8")
        for heading in (first, last):
            assert f"## {heading}\n" in source, f"{stem} has no section {heading!r}"
    for needed in ("Break", "Buffer", "If the live segment fails", "Paged-attention deck"):
        assert needed in text, needed


def test_the_print_views_offer_a_handout_and_an_answer_sheet():
    page = course_kit.print_views()._repr_html_()
    assert 'data-lab-print="handout"' in page and 'data-lab-print="answers"' in page
    assert "#exercises details" in page and "beforeprint" in page  # the handout drops solutions; Print opens them

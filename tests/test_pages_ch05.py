"""The page modules of chapters 5 and 5b (lab.book.pages.ch05, ch05b): each fact the chapters state, read once from
its run of record, named where it comes from data; the H200's decode arguments held against the measured ridge;
tables without raw Python; the code the chapters teach shown by function object."""

from __future__ import annotations

import re

import pytest

from lab.book.facts import glued_value
from lab.book.pages import ch05, ch05b, declared
from lab.book.show import show
from lab.measure.attention import split_kv, split_kv_tuned, triton_paged_decode
from lab.results import kernel_runs, paged, roofline
from lab.results.facts import Fact
from lab.results.quantities import other_run


@pytest.fixture(scope="module", params=["ch05", "ch05b"])
def page(request):
    return {"ch05": ch05, "ch05b": ch05b}[request.param]


def test_facts_are_read_once_and_every_number_from_data_is_named(page):
    facts = page.facts()
    assert page.facts() is facts  # cached: a second call reads nothing
    for name, fact in facts.items():
        assert isinstance(fact, Fact), name
        if fact.source.startswith("data/") and isinstance(fact.value, (int, float)):
            assert fact.quantity, f"{name}: a number from {fact.source} without a quantity name"
        assert glued_value(fact) != "not measured yet", f"{name}: the committed runs should measure it"


def test_the_quantities_the_pages_declare_are_collected_once():
    found = declared()
    for name in ("h200.decode.tokens_at_measured_ridge", "h200.decode.pct_of_ceiling", "h200.paged_decode.pct_of_ceiling",
                 "h200.paged_decode.fraction_of_contiguous", "h200.flex_masks.sdpa_over_flex"):
        assert name in found


def test_decode_is_held_against_the_measured_ridge():
    facts = ch05.facts()
    ridge = roofline.measured_ridge()
    assert facts["h200_ridge_measured"] == ridge
    assert facts["dec_intensity"].value == pytest.approx(ch05.MODEL.q_heads / ch05.MODEL.kv_heads)
    # the speculative crossover is the measured ridge over one token's intensity, and the sweep brackets it
    crossover = facts["dec_tokens_at_ridge"]
    assert crossover.value == pytest.approx(ridge.value / facts["dec_intensity"].value)
    assert crossover.run == roofline.MATMUL_RUN
    assert facts["rows_tok_flat_tokens"].value < crossover.value < facts["rows_tok_off_tokens"].value
    assert facts["rows_mla_vs_ridge"].value == pytest.approx(facts["mla_ai"].value / ridge.value)


def test_the_floor_divides_by_the_bandwidth_ceiling():
    facts = ch05.facts()
    ceiling = facts["dec_ceiling_tbs"].value * 1e12
    assert facts["dec_floor_us"].value == pytest.approx(facts["dec_mb_32k"].value * 1e6 / ceiling * 1e6)


def test_the_contiguous_kernel_has_one_run_of_record_and_the_paged_run_is_named():
    record = ch05.facts()["d_tuned_b16_pct"]
    assert record == kernel_runs.decode_share("ours-tuned", 16, 32768) and other_run(record.quantity) is None
    again = paged.ceiling_share("contiguous", 16, 32768)
    assert again.quantity == f"{record.quantity}@{paged.PAGED_RUN}"  # the same quantity, quoted from another run
    assert paged.PAGED_RUN in kernel_runs.DECODE_SHARE.others


def test_the_paged_kernel_keeps_most_of_the_contiguous_bandwidth():
    facts = ch05b.facts()
    assert 0.9 < facts["p16_b16_share"].value < 1.0
    assert facts["p16_b16_gbps"].value < facts["contig_b16_gbps"].value


@pytest.mark.parametrize("table", ["rows_table", "split_plans"])
def test_chapter_5_tables_have_headers_and_no_raw_cells(table):
    _no_raw_cells(getattr(ch05, table)().to_html())


def test_the_check_table_shows_every_kernel_and_cut():
    # the shape of split_kv.check()'s answer, for each kernel the chapter checks
    html = ch05.check_table({"teaching": {"1 piece": 1.3e-7, "3 pieces": 1.6e-7}, "tuned": {"7 pieces": 3.6e-7}}).to_html()
    _no_raw_cells(html)
    assert html.count("teaching") == 2 and "7 pieces" in html and "1.6 × 10⁻⁷" in html


@pytest.mark.parametrize("table", ["paged_errors", "paged_table", "versus_fa3", "tile_counts", "masks_table"])
def test_chapter_5b_tables_have_headers_and_no_raw_cells(table):
    _no_raw_cells(getattr(ch05b, table)().to_html())


def _no_raw_cells(html: str):
    cells = re.findall(r"<td[^>]*>(.*?)</td>", html)
    assert cells and not [c for c in cells if c.strip().lower() in ("nan", "none", "")], cells
    assert 'class="row_heading' not in html  # no index column
    assert not re.search(r"\d\.\d{5,}", " ".join(cells)), "a number printed unrounded"


def test_the_masks_table_says_what_flash_cannot_run():
    html = ch05b.masks_table().to_html()
    assert html.count("plain causal only") == 4 and "nan" not in html.lower()


def test_the_block_table_demo_reads_the_same_keys():
    import torch

    k = torch.arange(2 * 1 * 10 * 4, dtype=torch.float32).view(2, 1, 10, 4)
    k_cache, _, table, lengths = triton_paged_decode.paginate(k, -k, page_size=4, seq_lens=[10, 5], seed=1)
    shown = ch05b.addressing(k, k_cache, table, 4, [(0, 6), (1, 4)]).data
    assert list(shown["key from the page pool"]) == list(shown["k[sequence, 0, token]"])
    assert "(unused)" in ch05b.block_table(table, lengths, 4).to_html()


def test_the_code_the_chapters_teach_is_shown_by_function_object():
    split = repr(show(split_kv.teaching_split_kernel, split_kv.combine_kernel, split_kv_tuned.tuned_split_kernel))
    assert "def teaching_split_kernel(" in split and "def combine_kernel(" in split and "tl.dot(" in split
    paged_kernel = repr(show(triton_paged_decode.paged_split_kernel))
    assert "tl.load(pages + cols // PAGE_SIZE" in paged_kernel  # the block-table lookup

"""Course kit (chapter 9): the facts the page states, its session plans' slide ranges, its printable views.

    glue_all(course_kit.facts())         # the one hidden cell
    course_kit.print_views()             # the two printable views: student handout, teacher's answer sheet

The numbers are the teaching chapters' facts, quoted from what each page glued in this build
(:mod:`lab.book.quoted`): chapters 1, 2, 4, 4b, 5, 5b, 6, 6b and 7, each under its own glue name, shown in the
interview page's formats where that page glued a bare number (:data:`lab.book.pages.interview.SHOWN`). Exercise
3's worked fit is chapter 6's (the same function over the same sweep: its ``a10g_*_c`` and the fitted shares at the
middle published length) beside chapter 2's published shares. The worked solutions that compute something of
their own (Exercises 5 and 7) do it here, from those facts (:func:`_counted`).

A session plan names each segment's deck and slide range. The ranges are counted from the decks as
``python -m lab slides`` makes them (:func:`lab.book.slides.to_slides_notebook` over each chapter as this
build executed it), so a deck that gains a slide moves the plan with it (:func:`deck_outline`).
"""

from __future__ import annotations

import functools
import html
import math

from lab import LabError
from lab.book import slides
from lab.book.facts import Fact
from lab.book.pages.interview import SHOWN
from lab.book.quoted import quoted

# --- the facts ------------------------------------------------------------------------------------------

#: the teaching page -> the glue names the course kit states from it.
TEACHING = {
    "book/01-roofline": ("my_machine", "my_flops", "my_bw", "my_ridge", "my_dtype", "h100_tflops", "h100_tbs",
                         "h100_ridge_datasheet", "a10g_gbs", "a10g_ridge_datasheet", "h200_ridge_datasheet",
                         "weights_streamed_gb", "dec_ai", "fig_n", "flash_comp_ai", "flash_reread_ai"),
    "book/02-naive-attention": ("big_n", "big_sp_gb", "big_floor_gb", "big_flash_gb", "mem_a10g", "fit_a10g",
                                "kv_kb", "dec_n", "chk_n", "chk_kernel", "chk_ms", "chk_reread_ms",
                                "chk_margin_pct", "dram32k_bytes", "dram32k_where", "dram32k_ai", "fa_share_8192",
                                "flex_share_8192"),
    "book/04-flashattention-triton": ("abl_16k_1_pct", "abl_16k_2_pct", "abl_16k_3_pct", "abl_16k_4_pct",
                                      "race_flex_vs_fa3_16k", "race_cudnn_vs_fa3_16k", "drift_pct"),
    "book/04b-backward-pass": ("bwd_ms_ours_16k", "bwd_ratio_ours_16k", "bwd_ratio_cudnn_16k", "ctr_dkdv_ms",
                               "ctr_dq_ms", "ctr_cudnn_ms", "ctr_dkdv_tensor", "ctr_dq_tensor", "ctr_cudnn_tensor",
                               "dkdv_rows"),
    "book/05-decode-split-kv": ("dec_intensity", "h200_ridge_measured"),
    "book/05b-paged-attention": ("kv_gb_32k", "p16_b16_gbps", "contig_b16_gbps", "p16_b16_share", "pbig_b16_share", "sw_speedup",
                                 "sw_sdpa", "doc_speedup", "causal_flex_vs_flash"),
    "book/06-vllm-sweeps": (
                        "a10g_c_ratio", "a10g_chunk", "a10g_fa_share_mid", "a10g_flex_share_mid",
                        "a10g_share_mid_len", "a10g_decode_floor_long", "a10g_decode_floor_short",
                        "a10g_fa_b", "a10g_fa_c", "a10g_fa_itl_growth", "a10g_fa_itl_long", "a10g_fa_itl_short",
                        "a10g_fa_kv_pct", "a10g_fa_kv_rate", "a10g_flex_b", "a10g_flex_c", "a10g_flex_itl_growth",
                        "a10g_flex_itl_long", "a10g_flex_itl_short", "a10g_flex_kv_pct", "a10g_flex_kv_rate",
                        "a10g_longest", "a10g_short_len", "a10g_ttft_long_fa", "a10g_ttft_long_flex",
                        "a10g_ttft_long_ratio", "batch_16_fa_itl", "batch_1_fa_itl", "batch_1_floor_itl",
                        "batch_4_fa_itl", "batch_64_fa_itl", "batch_64_fa_x_floor", "batch_64_floor_itl",
                        "batch_64_kv_share", "chunks_long", "conc_fa3_2k_1", "conc_fa3_2k_64",
                        "conc_fa3_2k_tok_s_gain", "conc_fa3_32k_16_floor", "conc_fa3_32k_1_floor",
                        "conc_fa3_32k_4_floor", "flex_vs_cudnn_causal", "floor_extra_ms", "h200_ceiling_gbs",
                        "h200_common_len", "h200_ttft_common_fa", "h200_ttft_common_flex", "itl_flash_extra_ms",
                        "itl_flex_extra_ms", "itl_ratio_long", "batch_kv_bound_short", "batch_kv_bound_long",
                        "kv_extra_gb", "ttft_ratio_short"),
    "book/06b-busy-server": (
                        "bm_chunk", "curve_1_mm1", "curve_1_p50_tpot", "curve_1_p99_ttft", "curve_1_rate",
                        "curve_1_rho", "curve_2_mm1", "curve_2_p50_tpot", "curve_2_p99_ttft", "curve_2_rate",
                        "curve_2_rho", "curve_3_mm1", "curve_3_p50_tpot", "curve_3_p99_ttft", "curve_3_rate",
                        "curve_3_rho", "curve_4_mm1", "curve_4_p50_tpot", "curve_4_p99_ttft", "curve_4_rate",
                        "curve_4_rho", "curve_5_mm1", "curve_5_p50_tpot", "curve_5_p99_ttft", "curve_5_rate",
                        "curve_5_rho", "curve_6_mm1", "curve_6_p50_tpot", "curve_6_p99_ttft", "curve_6_rate",
                        "curve_6_rho", "fa3_break_rate", "fa3_break_throughput", "fa3_capacity", "fa3_slo_rate",
                        "flex_break_rate", "fp8_bf16_cache_tokens", "fp8_bf16_top_admitted", "fp8_bf16_top_floor",
                        "fp8_bf16_top_itl", "fp8_bf16_top_n", "fp8_cache_x", "fp8_context", "fp8_fp8_cache_tokens",
                        "fp8_fp8_top_admitted", "fp8_fp8_top_floor", "fp8_fp8_top_itl", "fp8_fp8_top_x_floor",
                        "inter_8l_decoders", "inter_8l_stall_cut", "inter_8l_ttft_cost", "inter_chunk_big",
                        "inter_chunk_small", "inter_fa3_2048_8l_max", "inter_fa3_2048_8l_ttft",
                        "inter_fa3_8192_8l_max", "inter_fa3_8192_8l_ttft", "inter_long_len", "kv_token_bf16",
                        "kv_token_fp8", "slo_ttft_ms"),
    "book/07-the-trace": ("a10g_mm28_fa", "a10g_mm28_fx", "a10g_at28_fa", "a10g_at28_fx", "a10g_mm28_diff_pct",
                          "a10g_decode_fa", "a10g_decode_fx", "naive_fa_s", "naive_fa_prefill_s", "q_heads",
                          "kv_heads", "group", "census_len"),
}

PAGE = 16  # vLLM's default block size, the page of Exercise 7


def _counted(f: dict[str, Fact]) -> dict[str, Fact]:
    """Exercises 5 and 7, worked from the facts they start from."""
    n, chunk = int(f["a10g_longest"].value), int(f["a10g_chunk"].value)
    pairs = sum(min(chunk, n - start) * min(start + chunk, n) for start in range(0, n, chunk))
    where = "lab.book.pages.course_kit, counted from the A10G study's longest prompt and chunk (chapter 6's facts)"
    return {"ex_pairs_ratio": Fact(pairs / (n * n / 2), where),
            "ex_pages": Fact(math.ceil(n / PAGE), where),
            "ex_page_waste_max_kib": Fact((PAGE - 1) * f["kv_kb"].value,
                                          "lab.book.pages.course_kit: 15 tokens of Qwen2.5-7B's KV cache (chapter "
                                          "2's kv_kb)")}


# --- the decks ------------------------------------------------------------------------------------------

@functools.cache
def deck_outline(stem: str) -> tuple[tuple[int, str], ...]:
    """(slide number, heading) for each ``#``/``##`` heading of a chapter's deck, counted as reveal.js numbers the
    horizontal slides (1 is the title), from the deck ``python -m lab slides`` makes of this build's chapter."""
    notebook, glue = slides.load_chapter(stem)
    deck = slides.to_slides_notebook(notebook, glue)
    number, started, outline = 0, False, []
    for cell in deck.cells:
        kind = cell.get("metadata", {}).get("slideshow", {}).get("slide_type", "-")
        if kind in ("notes", "skip"):
            continue
        if not started or kind == "slide":  # the first visible cell opens the first slide
            number, started = number + 1, True
        if cell.cell_type == "markdown":
            outline += [(number, line.lstrip("#").strip()) for line in cell.source.splitlines()
                        if line.startswith(("# ", "## "))]
    return tuple(outline) + ((number + 1, ""),)  # the end: one past the last slide


def slide_range(stem: str, first: str, last: str) -> tuple[int, int]:
    """The slides of a deck from section ``first`` through section ``last`` (their headings)."""
    outline = deck_outline(stem)
    headings = [heading for _, heading in outline]
    for heading in (first, last):
        if heading not in headings:
            raise LabError(f"the {stem} deck has no section {heading!r}; its sections: {', '.join(headings[:-1])}")
    start = outline[headings.index(first)][0]
    end = outline[headings.index(last) + 1][0] - 1
    return start, max(start, end)


#: glue name -> (deck, first section, last section): the slides each plan segment shows.
SEGMENTS = {
    "deck_roofline": ("01-roofline", "FLOPs per byte", "The roofline and its ridge point"),
    "deck_roofline_live": ("01-roofline", "FLOPs per byte", "This machine, measured now"),
    "deck_nxn": ("02-naive-attention", "Three passes over memory", "Bytes, memory and time as the prompt grows"),
    "deck_tiling": ("03-tiling-online-softmax", "The problem with a row-wise normaliser", "Tiles of queries and tiles of keys"),
    "deck_kernel": ("04-flashattention-triton", "The teaching kernel", "What each change bought"),
    "deck_backward": ("04b-backward-pass", "The race", "The race"),
    "deck_decode": ("05-decode-split-kv", "One division: decode is memory-bound", "Merging the pieces exactly"),
    "deck_decode_h200": ("05-decode-split-kv", "One division: decode is memory-bound", "What the H200 measured"),
    "deck_paged": ("05b-paged-attention", "Why an engine pages the cache", "FlexAttention: the variant as a program"),
    "deck_sweeps": ("06-vllm-sweeps", "Prefill: where the curves part", "Decode: flat or climbing"),
    "deck_busy": ("06b-busy-server", "Latency against throughput", "Latency against throughput"),
    "deck_trace": ("07-the-trace", "Sorting kernels into families", "The A10G census: matmul is the control"),
    "deck_review": ("08-interview-prep", "The 60-second review", "The 60-second review"),
}


def _segment_facts() -> dict[str, Fact]:
    out = {}
    for name, (stem, first, last) in SEGMENTS.items():
        start, end = slide_range(stem, first, last)
        text = f"slide {start}" if start == end else f"slides {start}–{end}"
        out[name] = Fact(text, f"lab.book.slides: the {stem} deck as python -m lab slides makes it of this build")
    return out


def deck_links(names: tuple[str, ...] | None = None) -> SegmentLinks:
    """Links from the page to each plan segment's first slide (reveal.js: ``#/<slide - 1>``)."""
    return SegmentLinks({name: SEGMENTS[name] for name in (names or SEGMENTS)})


class SegmentLinks:
    """An HTML list: each segment's deck, opened at its first slide."""

    def __init__(self, segments: dict[str, tuple[str, str, str]]):
        self.rows = [(stem, first, last, *slide_range(stem, first, last)) for stem, first, last in segments.values()]

    def _repr_html_(self) -> str:
        items = "".join(
            f'<li><a href="../slides/{stem}.slides.html#/{start - 1}">{html.escape(stem)}, '
            f'{"slide" if start == end else "slides"} {start}{"" if start == end else f"–{end}"}</a>: '
            f'{html.escape(first)}{"" if first == last else " … " + html.escape(last)}</li>'
            for stem, first, last, start, end in self.rows)
        return f'<ul class="lab-decks">{items}</ul>'

    def __repr__(self) -> str:
        return "\n".join(f"slides/{stem}.slides.html#/{start - 1}  {first} ... {last}"
                         for stem, first, last, start, _ in self.rows)


# --- the printable views --------------------------------------------------------------------------------

class PrintViews:
    """Two print buttons: the student handout (the page's title and its exercises, without their solutions: no
    plans, no reveals) and the teacher's answer sheet (the whole page, every dropdown opened). Printing from the
    browser's menu prints the answer sheet, and says so on the paper."""

    CSS = """
@media screen { .lab-print-only { display: none; } }
@media print {
  .lab-print-views button { display: none; }
  .lab-print-only { display: block; }
  body.lab-handout section:has(> h1) > :not(h1):not(#exercises):not(#course-kit-exercises) { display: none !important; }
  body.lab-handout #exercises details, body.lab-handout #course-kit-exercises details { display: none !important; }
  body.lab-handout .lab-answers-note, body:not(.lab-handout) .lab-handout-note { display: none !important; }
}"""
    SCRIPT = """
(function () {
  function solutions() { return document.querySelectorAll("main details"); }
  function printAs(mode) {
    document.body.classList.toggle("lab-handout", mode === "handout");
    var opened = [];
    if (mode !== "handout") {
      solutions().forEach(function (d) { if (!d.open) { d.open = true; opened.push(d); } });
    }
    window.print();
    opened.forEach(function (d) { d.open = false; });
    document.body.classList.remove("lab-handout");
  }
  window.addEventListener("beforeprint", function () {  // the browser's own Print: the answer sheet, opened
    if (!document.body.classList.contains("lab-handout")) { solutions().forEach(function (d) { d.open = true; }); }
  });
  document.querySelectorAll("[data-lab-print]").forEach(function (b) {
    b.addEventListener("click", function () { printAs(b.getAttribute("data-lab-print")); });
  });
})();"""

    def _repr_html_(self) -> str:
        return (f"<style>{self.CSS}</style>"
                '<div class="lab-print-views">'
                '<button type="button" data-lab-print="handout">Print the student handout</button> '
                '<button type="button" data-lab-print="answers">Print the teacher\'s answer sheet</button>'
                '<p class="lab-print-only lab-answers-note"><strong>Teacher\'s answer sheet:</strong> every '
                "solution and reveal is printed open. The student handout prints from the first button on the "
                "page.</p>"
                '<p class="lab-print-only lab-handout-note"><strong>Student handout:</strong> the exercises '
                "without their solutions; the solutions are on the teacher's answer sheet.</p></div>"
                f"<script>{self.SCRIPT}</script>")

    def __repr__(self) -> str:
        return "Print the student handout | Print the teacher's answer sheet"


def print_views() -> PrintViews:
    return PrintViews()


@functools.cache
def facts() -> dict[str, Fact]:
    """Every fact the course kit states, by glue name."""
    taken = quoted(TEACHING, shown=SHOWN)
    return taken | _counted(taken) | _segment_facts()

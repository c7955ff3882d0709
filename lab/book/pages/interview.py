"""Interview prep (chapter 8): every fact the page states, each the fact of the chapter that teaches it.

    glue_all(interview.facts())          # the one hidden cell

The page reads no data itself. A number taught by a chapter with a page module is that chapter's fact, under
its glue name (``abl_16k_1_pct`` is chapter 4's exp2 step, ``dec_tokens_at_ridge`` chapter 5's
speculative-decoding crossover), quoted from what that page glued in this build
(:mod:`lab.book.quoted`: the fact registry holds each page's facts as it stated them); the chapters build
before this page. :data:`TAKEN` lists them, chapter by chapter. Importing the chapters'
page modules instead would bring their figures, explorers and kernels along (more than two fifths of lab:
``tests/test_reach.py``). The few numbers the answers derive from two such facts (Flex against cuDNN on
plain causal) are quantities declared here, computed from those facts, never from a file.

Chapters 1-3, 6 and 6b have no page module yet. Their facts are read as the interview always read them
(:mod:`lab.book.interview`), in one marked place below (``_from_ch01`` ... ``_from_ch06b``), each number
from data named by an interim quantity of its run (:data:`INTERIM`) until those chapters' page modules
state it; then each function becomes an entry of :data:`TAKEN`.
"""

from __future__ import annotations

import functools

from lab import LabError
from lab.book.facts import Fact
from lab.book.interview import a10g, busy, h200, studies
from lab.book.quoted import quoted, taught_elsewhere
from lab.results import records
from lab.results.quantities import Quantity

# --- facts taken from the chapters that teach them ------------------------------------------------------

#: the teaching page -> the glue names this page states from it (the same fact, the same name).
TAKEN = {
    "book/02-naive-attention": (
        # the prefill counters (data/h200/kernel-counters): the span over the kernels and FA3's XU share
        "kc_n", "kc_fa3_xu", *(f"kc_{key}_{end}" for key in ("rate_pct", "read_over_compulsory", "tensor_pct")
                               for end in ("min", "max"))),
    "book/04-flashattention-triton": (
        # the race of record (data/h200/kernels-race): Flex, cuDNN and our kernel against FA3
        "race_flex_vs_fa3_16k", "race_cudnn_vs_fa3_16k", "race_tuned_vs_fa3_16k", "race_tuned_vs_fa3_32k",
        "h200_peak_tf",
        # the ablation of record (data/h200/kernels-ablation), steps 1-6 at 16k, as chapter 4's table
        *(f"abl_16k_{step}_pct" for step in range(1, 7)), "abl_16k_0_tf", "abl_16k_6_tf",
        # the register cap (data/h200/kernels, tuning_forward.csv)
        "cap_launch", "cap_regs", "cap_progs", "cap_ms", "cap_cap", "cap_progs_capped", "cap_ms_capped",
        "cap_speedup",
        # chapter 2's counters as chapter 4 states them (data/h200/kernel-counters)
        "ctr_fa3_tensor", "ctr_ours_tensor",
        # FA3's schedule by hand: the Gluon race, its launch and its counters
        "hk_vs_16k", "hk_vs_32k", "hk_triton_vs_16k", "hk_triton_vs_32k", "hk_neither_vs_16k",
        "hk_overlap_pct_16k", "hk_pingpong_16k", "hk_producer_regs", "hk_consumer_regs", "hk_rows",
        "hk_producer_warps", "hk_padding_warps", "hk_launch_warps", "hk_ctr_speed", "hk_ctr_cycles",
        "hk_fa3_clock", "hk_ours_clock", "hk_tensor_apart_pct", "drift_pct"),
    "book/05-decode-split-kv": (
        "dec_intensity", "dec_tokens_at_ridge", "h200_ridge_measured", "mla_ai", "mla_heads",
        "rows_fa3_flat", "rows_fa3_off", "rows_fa3_most", "rows_fa3_most_pct", "rows_ours_flat",
        *(f"d_{key}_b{batch}_pct" for key in ("tuned", "flash", "flex") for batch in (1, 16))),
    "book/05b-paged-attention": (
        "p16_b16_gbps", "contig_b16_gbps", "p16_b16_share", "pbig_b16_share", "p16_b1_share", "p16_b16_of_read",
        "big_page", "sw_speedup", "sw_sdpa", "doc_speedup", "sw_flex_tflops", "causal_flex_vs_flash",
        "cudnn_dense_16k"),
    "book/07-the-trace": (
        "a10g_mm28_fa", "a10g_mm28_fx", "a10g_at28_fa", "a10g_at28_fx", "a10g_mm28_diff_pct", "a10g_at28_ratio",
        "a10g_decode_fa", "a10g_decode_fx", "naive_fa_s", "naive_fa_prefill_s", "q_heads", "kv_heads", "group",
        "h200_mm28_fa", "h200_mm28_fx", "h200_mm28_diff_pct", "h200_same_launches", "clock_fa_28k_mhz",
        "clock_fx_28k_mhz", "clock_fa_28k_capped", "clock_fa_28k_samples", "clock_fx_28k_capped",
        "clock_fx_28k_samples"),
}
#: this page, as the fact registry names it
PAGE = "book/08-interview-prep"
FLEX_OVER_CUDNN = Quantity("h200.prefill.flex_over_cudnn", "FlexAttention's speed over SDPA's cuDNN backend "
                           "(is_causal=True) on plain causal prefill, both timed against FA3 in the race of record "
                           "(chapter 4's race_flex_vs_fa3 over race_cudnn_vs_fa3)", run="h200/kernels-race",
                           file="prefill.csv", unit="×", fmt="{:.2f}×")


def _derived(taken: dict[str, Fact]) -> dict[str, Fact]:
    """Ratios of two taught facts of one run, which the answers state and no chapter does."""
    flex, cudnn = taken["race_flex_vs_fa3_16k"], taken["race_cudnn_vs_fa3_16k"]
    ratio = flex.value / cudnn.value if flex.measured and cudnn.measured else None
    return {"race_flex_vs_cudnn_16k": FLEX_OVER_CUDNN.fact(ratio, "16k")}


# --- interim: chapters 1-3, 6 and 6b, read as the interview reads them until their page modules exist -----

_INTERIM_RUNS = ("h200/kernels", "h200/kernel-counters", "h200/dram-bytes", "h200/flex-decomposition",
                 "h200/vllm0.26-qwen2.5-7b", "h200/vllm0.26-qwen2.5-7b-concurrency",
                 "h200/vllm0.26-qwen2.5-7b-load", "h200/vllm0.26-qwen2.5-7b-interference")
#: run -> the interim quantity that names a number of it which only lab.book.interview reads (one member
#: per glue name); each goes when the chapter that teaches the number states it from its page module.
INTERIM = {run: Quantity(f"interim.{run.replace('/', '.')}", f"a figure of data/{run} as lab.book.interview "
                         "reads it (one member per glue name), until the chapter that teaches it states it from "
                         "its page module", run=run) for run in _INTERIM_RUNS}


def _named(facts: dict[str, Fact]) -> dict[str, Fact]:
    """Each number read from data/ without a quantity, as a member of its run's interim quantity."""
    out = {}
    for name, fact in facts.items():
        number = isinstance(fact.value, (int, float)) and not isinstance(fact.value, bool)
        if fact.quantity or not number or not (fact.source or "").startswith("data/"):
            out[name] = fact
            continue
        run = records.run_holding(fact.source.split()[0].rstrip(","))
        if run is None or run.folder not in INTERIM:
            raise LabError(f"{name}: {fact.source} is no run with an interim quantity (lab.book.pages.interview)")
        out[name] = INTERIM[run.folder].fact(fact.value, name, fmt=fact.fmt, detail=fact.source)
    return out


_a10g = functools.cache(a10g.a10g_facts)  # the A10G study's facts, chapters 1 and 6 quote parts of them


def _from_ch01() -> dict[str, Fact]:
    """The roofline: datasheet ridges and bandwidths, the model's intensities and byte counts, the A10G floors."""
    return {name: fact for name, fact in _a10g().items() if name in _CH01}


_CH01 = ("ridge_h100", "ridge_a10g", "ridge_h200", "h100_tflops", "h100_tb_s", "a10g_sms", "a10g_mem_gb",
         "sp_gb_layer_long", "naive_max_len_a10g", "naive_gb_layer_long", "flash_gb_layer_long",
         "compulsory_gb_layer_long", "naive_over_flash_bytes", "intensity_compulsory_long", "intensity_reread_long",
         "crossover_len", "attn_flop_share_long_pct", "head_dim", "kv_gb_long", "kv_mha_gb_long", "weights_gb",
         "weights_streamed_gb", "kv_equals_weights_tokens", "decode_intensity", "qk_intensity_cap",
         "page_kib_per_head", "a10g_gb_s", "h200_tb_s", "kv_kb_per_token", "floor_short_ms", "floor_long_ms")


def _from_ch02() -> dict[str, Fact]:
    """The n×n matrix: the DRAM bytes Nsight Compute counted, the stopwatch check (its counters are taken above)."""
    return studies.dram_facts() | h200.stopwatch_facts()


def _from_ch03() -> dict[str, Fact]:
    """Tiling and the online softmax: the answers state none of its numbers."""
    return {}


def _from_ch06() -> dict[str, Fact]:
    """Live vLLM sweeps: the A10G study's sweep, fits and shares, the H200 sweeps, the concurrency sweep,
    the decode floor against the batch, Flex's decomposition and its counters."""
    sweep = {name: fact for name, fact in _a10g().items() if name in _CH06_A10G}
    return (sweep | h200.sweep_facts() | studies.concurrency_facts() | studies.roofline_batch_facts()
            | studies.decomposition_facts() | studies.counter_facts())


_CH06_A10G = ("a10g_short_len", "a10g_two_k_len", "a10g_long_len", "b_flash", "b_flex", "c_flash", "c_flex",
              "c_ratio", "ttft_flash_short", "ttft_flash_long", "ttft_flex_short", "ttft_flex_long",
              "ttft_ratio_short", "ttft_ratio_long", "itl_flash_short", "itl_flash_2k", "itl_flash_long",
              "itl_flex_short", "itl_flex_2k", "itl_flex_long", "itl_flash_growth_pct", "itl_flex_growth_pct",
              "itl_flash_extra_ms", "itl_flex_extra_ms", "itl_ratio_long", "itl_gap_2k", "itl_gap_long",
              "decode_equals_prefill_tokens", "request_ratio_long", "floor_extra_ms", "kv_extra_gb", "chunk_a10g",
              "kv_bw_flash_gb_s", "kv_bw_flex_gb_s", "kv_bw_flash_pct", "kv_bw_flex_pct",
              "chunks_long", "census_len", "share_len", "share_flash_pct", "share_flex_pct", "attn_flop_share_share_len_pct")


def _from_ch06b() -> dict[str, Fact]:
    """A busy server: load, a long prompt among decoders, an FP8 KV cache (chapter 6b and its method)."""
    return busy.facts()


def interim_facts() -> dict[str, Fact]:
    """The facts of chapters 1-3, 6 and 6b as the interview reads them, each number from data named."""
    return _named(_from_ch01() | _from_ch02() | _from_ch03() | _from_ch06() | _from_ch06b())


@functools.cache
def facts() -> dict[str, Fact]:
    """Every fact the interview page states, by glue name."""
    teaching, interim = quoted(TAKEN), interim_facts()
    # an interim name that a chapter already states is that chapter's fact (glued once, one value)
    interim |= taught_elsewhere(set(interim), PAGE)
    clash = sorted(set(teaching) & set(interim))
    if clash:
        raise LabError(f"{', '.join(clash)}: taken from a teaching page and read again here")
    return teaching | _derived(teaching) | interim

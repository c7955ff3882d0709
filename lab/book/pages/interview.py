"""Interview prep (chapter 8): every fact the page states, each the fact of the chapter that teaches it.

    glue_all(interview.facts())          # the one hidden cell

The page reads no data itself. A number taught by a chapter with a page module is that chapter's fact, under
its glue name (``abl_16k_1_pct`` is chapter 4's exp2 step, ``dec_tokens_at_ridge`` chapter 5's
speculative-decoding crossover), quoted from what that page glued in this build
(:mod:`lab.book.quoted`: the fact registry holds each page's facts as it stated them); the chapters build
before this page. :data:`TAKEN` lists them, chapter by chapter. Importing the chapters'
page modules instead would bring their figures, explorers and kernels along (more than two fifths of lab:
``tests/test_reach.py``). The few numbers the answers derive and no chapter states (Flex against cuDNN on
plain causal; the KV cache of one sequence without GQA, where a KV cache's tokens equal the streamed weights) are
quantities declared here, computed from those facts (:func:`derived`), never from a file.

Chapters 6 and 6b have no page module yet. Their facts are read as the interview always read them
(:mod:`lab.book.interview`), in one marked place below (``_from_ch06``, ``_from_ch06b``), each number from data
named by an interim quantity of its run (:data:`INTERIM`) until those chapters' page modules state it; then each
function becomes an entry of :data:`TAKEN`.
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
    "book/01-roofline": (
        # datasheet figures and ridges (for comparisons on paper), the weights in memory and streamed per step
        "h100_tflops", "h100_tbs", "h100_ridge_datasheet", "a10g_gbs", "a10g_ridge_datasheet", "h200_tbs",
        "h200_ridge_datasheet", "weights_gb", "weights_streamed_gb",
        # the serving kernels at fig_n tokens on the H100's roof: a decode matmul, QK^T's cap, a fused kernel
        "dec_ai", "qk_limit", "fig_n", "flash_comp_ai", "flash_reread_ai",
        # the A10G study's shortest decode against its floor (data/reference/a10g-vllm0.11-qwen2.5-7b)
        "ref_short_len", "ref_short_itl", "ref_short_bound"),
    "book/02-naive-attention": (
        # the byte model at big_n tokens (tiles sized for the H200's shared memory) and what fits in memory
        "big_n", "big_sp_gb", "big_naive_gb", "big_flash_gb", "big_floor_gb", "big_ratio", "mem_a10g", "fit_a10g",
        "head_dim", "kv_kb", "dec_n", "cross_n", "model_share_32768",
        # the DRAM bytes Nsight Compute counted (data/h200/dram-bytes): ours at 32k, cuDNN's at 4k
        "dram32k_bytes", "dram32k_where", "dram32k_l2", "dram32k_ai", "short_measured_gb",
        # the stopwatch check at chk_n tokens (data/h200/kernels) at the bandwidth ceiling and the datasheet's
        "chk_n", "chk_kernel", "chk_ms", "chk_reread_ms", "chk_margin_pct", "chk_ceiling_tbs", "chk_ds_tbs",
        "chk_reread_ds_ms",
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
    "book/04b-backward-pass": (
        # the backward race at 16k (data/h200/backward-race) and its counters (data/h200/backward-counters)
        "bwd_ms_ours_16k", "bwd_ms_flash_16k", "bwd_ms_cudnn_16k", "bwd_vs_flash_16k", "bwd_vs_cudnn_16k",
        "bwd_ratio_ours_16k", "bwd_ratio_cudnn_16k", "ctr_dkdv_ms", "ctr_dq_ms", "ctr_cudnn_ms", "ctr_dkdv_tensor",
        "ctr_dq_tensor", "ctr_cudnn_tensor", "ctr_dkdv_registers", "dkdv_rows",
        # storing P against rebuilding it, and what P would occupy in training
        "p_gb_16k", "p_traffic_ms_16k", "recompute_ms_16k", "recompute_intensity", "p_model_tb_32k",
        "lse_model_mb_32k", "h200_memory_gb"),
    "book/05-decode-split-kv": (
        "dec_intensity", "dec_tokens_at_ridge", "h200_ridge_measured", "mla_ai", "mla_heads",
        "rows_fa3_flat", "rows_fa3_off", "rows_fa3_most", "rows_fa3_most_pct", "rows_tuned_flat",
        *(f"d_{key}_b{batch}_pct" for key in ("tuned", "flash", "flex") for batch in (1, 16))),
    "book/05b-paged-attention": (
        "kv_gb_32k", "p16_b16_gbps", "contig_b16_gbps", "p16_b16_share", "pbig_b16_share", "p16_b1_share", "p16_b16_of_read",
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
#: What the answers derive from chapter 1's and chapter 2's model facts (Qwen2.5-7B's shape, bf16): no data read.
FROM_THE_MODEL = "lab.book.pages.interview: from chapters 1, 2 and 5b's facts of Qwen2.5-7B's shape (bf16)"
KV_IF_MHA = Quantity("qwen2.5-7b.kv_cache_gb_without_gqa", "the KV cache of one 32k-token sequence of Qwen2.5-7B "
                     "(chapter 5b's kv_gb_32k) if every query head kept its own keys and values: times chapter 2's "
                     "group", run=FROM_THE_MODEL, unit="GB")
KV_EQUALS_WEIGHTS = Quantity("qwen2.5-7b.kv_equals_streamed_weights_tokens", "the tokens of context whose KV cache "
                             "equals the weights a decode step streams (chapter 1's weights_streamed_gb over chapter "
                             "2's kv_kb per token)", run=FROM_THE_MODEL, unit="tokens")
PAGE_PER_HEAD = Quantity("qwen2.5-7b.page_kib_per_kv_head", "the keys of one 16-token page of one KV head in one "
                         "layer (16 × chapter 2's head_dim × 2 bytes)", run=FROM_THE_MODEL, unit="KiB")
PAGE_TOKENS = 16  # vLLM's default block size


def derived(taken: dict[str, Fact]) -> dict[str, Fact]:
    """What the answers derive from taught facts and no chapter states: ratios of two facts of one run, and the
    KV cache's size from the model's facts."""
    flex, cudnn = taken["race_flex_vs_fa3_16k"], taken["race_cudnn_vs_fa3_16k"]
    ratio = flex.value / cudnn.value if flex.measured and cudnn.measured else None
    kv_bytes = taken["kv_kb"].value * 1024  # chapter 2's KiB per token, all layers
    return {"race_flex_vs_cudnn_16k": FLEX_OVER_CUDNN.fact(ratio, "16k"),
            "kv_mha_gb_32k": KV_IF_MHA.fact(taken["kv_gb_32k"].value * taken["group"].value, "32k"),
            "kv_equals_weights_tokens": KV_EQUALS_WEIGHTS.fact(taken["weights_streamed_gb"].value * 1e9 / kv_bytes),
            "page_kib_per_head": PAGE_PER_HEAD.fact(PAGE_TOKENS * taken["head_dim"].value * 2 / 1024)}


# --- interim: chapters 6 and 6b, read as the interview reads them until their page modules exist -----------

_INTERIM_RUNS = ("h200/kernel-counters", "h200/flex-decomposition",
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


_a10g = functools.cache(a10g.a10g_facts)  # the A10G study's facts, chapter 6 quotes parts of them


def _from_ch06() -> dict[str, Fact]:
    """Live vLLM sweeps: the A10G study's sweep, fits and shares, the H200 sweeps, the concurrency sweep,
    the decode floor against the batch, Flex's decomposition and its counters."""
    sweep = {name: fact for name, fact in _a10g().items() if name in _CH06_A10G}
    return (sweep | h200.sweep_facts() | studies.concurrency_facts() | studies.roofline_batch_facts()
            | studies.decomposition_facts() | studies.counter_facts())


_CH06_A10G = ("a10g_sms", "a10g_short_len", "a10g_two_k_len", "a10g_long_len", "b_flash", "b_flex", "c_flash", "c_flex",
              "c_ratio", "ttft_flash_short", "ttft_flash_long", "ttft_flex_short", "ttft_flex_long",
              "ttft_ratio_short", "ttft_ratio_long", "itl_flash_short", "itl_flash_2k", "itl_flash_long",
              "itl_flex_short", "itl_flex_2k", "itl_flex_long", "itl_flash_growth_pct", "itl_flex_growth_pct",
              "itl_flash_extra_ms", "itl_flex_extra_ms", "itl_ratio_long", "itl_gap_2k", "itl_gap_long",
              "decode_equals_prefill_tokens", "request_ratio_long", "floor_short_ms", "floor_long_ms", "floor_extra_ms", "kv_extra_gb", "chunk_a10g",
              "kv_bw_flash_gb_s", "kv_bw_flex_gb_s", "kv_bw_flash_pct", "kv_bw_flex_pct",
              "chunks_long", "census_len", "share_len", "share_flash_pct", "share_flex_pct", "attn_flop_share_share_len_pct")


def _from_ch06b() -> dict[str, Fact]:
    """A busy server: load, a long prompt among decoders, an FP8 KV cache (chapter 6b and its method)."""
    return busy.facts()


def interim_facts() -> dict[str, Fact]:
    """The facts of chapters 6 and 6b as the interview reads them, each number from data named."""
    return _named(_from_ch06() | _from_ch06b())


@functools.cache
def facts() -> dict[str, Fact]:
    """Every fact the interview page states, by glue name."""
    teaching, interim = quoted(TAKEN), interim_facts()
    # an interim name that a chapter already states is that chapter's fact (glued once, one value)
    interim |= taught_elsewhere(set(interim), PAGE)
    clash = sorted(set(teaching) & set(interim))
    if clash:
        raise LabError(f"{', '.join(clash)}: taken from a teaching page and read again here")
    return teaching | derived(teaching) | interim

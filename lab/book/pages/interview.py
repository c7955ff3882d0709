"""Interview prep (chapter 8): every fact the page states, each the fact of the chapter that teaches it.

    glue_all(interview.facts())          # the one hidden cell

The page reads no data itself. A number taught by a chapter with a page module is that chapter's fact, under
its glue name (``abl_16k_1_pct`` is chapter 4's exp2 step, ``dec_tokens_at_ridge`` chapter 5's
speculative-decoding crossover), quoted from what that page glued in this build
(:mod:`lab.book.quoted`: the fact registry holds each page's facts as it stated them); the chapters build
before this page. :data:`TAKEN` lists them, chapter by chapter. Importing the chapters'
page modules instead would bring their figures, explorers and kernels along (more than two fifths of lab:
``tests/test_reach.py``). The few numbers the answers derive and no chapter states (the KV cache of one sequence
without GQA, where a KV cache's tokens equal the streamed weights) are
quantities declared here, computed from those facts (:func:`derived`), never from a file.

Chapters 6, 6b and 6c are quoted the same way: what the interview states of their runs and the chapters' prose does
not (the sweeps' ends compared, FA3's concurrency points with their floors, the load study's point within the
targets, 32 decoders under the longest prompt, the FP8 cache at one batch) their page modules state too
(:mod:`lab.book.pages.ch06.later`, :mod:`lab.book.pages.ch06b`), so every number here is a teaching page's fact.
Where this page shows a number in another format than its teaching page glued it (a length with thousands
separators, a rate rounded), :data:`SHOWN` says how; the fact stays that page's.
"""

from __future__ import annotations

import functools

from lab.book.facts import Fact
from lab.book.quoted import quoted
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
        "ref_short_itl", "ref_short_bound"),
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
        # chapter 4's race (data/h200/kernels-race): Flex, cuDNN and our kernel against FA3
        "race_flex_vs_fa3_16k", "race_cudnn_vs_fa3_16k", "race_tuned_vs_fa3_16k", "race_tuned_vs_fa3_32k",
        "h200_peak_tf",
        # the ablation of record (data/h200/kernels-ablation), steps 1-6 at 16k, as chapter 4's table
        *(f"abl_16k_{step}_pct" for step in range(1, 7)), "abl_16k_0_tf", "abl_16k_6_tf",
        # the register cap (data/h200/kernels, tuning_forward.csv)
        "cap_launch", "cap_regs", "cap_progs", "cap_ms", "cap_cap", "cap_progs_capped", "cap_ms_capped",
        "cap_speedup",
        # chapter 2's counters as chapter 4 states them (data/h200/kernel-counters)
        "ctr_fa3_tensor", "ctr_tuned_tensor",
        # FA3's schedule by hand: the Gluon race, its launch and its counters
        "hk_vs_16k", "hk_vs_32k", "hk_triton_vs_16k", "hk_triton_vs_32k", "hk_neither_vs_16k",
        "hk_overlap_pct_16k", "hk_pingpong_16k", "hk_producer_regs", "hk_consumer_regs", "hk_rows",
        "hk_producer_warps", "hk_padding_warps", "hk_launch_warps", "hk_ctr_speed", "hk_ctr_cycles",
        "hk_fa3_clock", "hk_gluon_clock", "hk_tensor_apart_pct", "drift_pct",
        # the persistent launch (data/h100/kernels-persistent-race and its counters)
        "pers_balanced_4k", "pers_default_4k", "pers_balanced_32k", "pers_default_32k", "pers_strided_excess_4k",
        "pers_programs_balanced", "pers_programs_default", "pers_cycles_vs_tile_16k",
        "pers_default_cycles_vs_fa3_16k"),
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
    "book/06-vllm-sweeps": (
        # the A10G and H200 sweeps, their fits, decode and floors, the concurrency sweep, Flex's decomposition and
        # counters, Flex against cuDNN on plain causal (lab.book.pages.ch06, with what only later pages state of
        # its runs: lab.book.pages.ch06.later)
        "a10g_c_ratio", "a10g_chunk", "a10g_fa_b", "a10g_fa_itl_2k", "a10g_fa_itl_growth", "a10g_fa_itl_long",
        "a10g_fa_kv_pct", "a10g_fa_kv_rate", "a10g_fa_share_32k", "a10g_flex_b", "a10g_flex_itl_2k",
        "a10g_flex_itl_growth", "a10g_flex_itl_long", "a10g_flex_kv_pct", "a10g_flex_kv_rate", "a10g_flex_share_32k",
        "a10g_longest", "a10g_short_len", "a10g_sms", "a10g_ttft_long_fa", "a10g_ttft_long_flex",
        "a10g_ttft_long_ratio", "a10g_two_k_len", "batch_16_fa_itl", "batch_16_fa_x_floor", "batch_1_fa_itl",
        "batch_1_fa_x_floor", "batch_1_flex_itl", "batch_1_flex_x_floor", "batch_4_fa_itl", "batch_4_fa_x_floor",
        "batch_64_fa_itl", "batch_64_fa_x_floor", "batch_flex_top_itl", "batch_flex_top_n", "batch_flex_top_x_floor",
        "chunks_long", "conc_fa3_2k_1", "conc_fa3_2k_1_floor", "conc_fa3_2k_1_tok_s", "conc_fa3_2k_64",
        "conc_fa3_2k_64_floor", "conc_fa3_2k_64_tok_s", "conc_fa3_2k_tok_s_gain", "conc_fa3_32k_16_floor",
        "conc_fa3_32k_16_gap", "conc_fa3_32k_1_floor", "conc_fa3_32k_1_gap", "conc_fa3_32k_1_tok_s",
        "conc_fa3_32k_4_floor", "decode_equals_prefill_tokens", "fa2_long_n", "fa2_ttft_ratio_long",
        "flex_ctr_template_speedup_b1", "flex_vs_cudnn_causal", "flexctr_default_b1_ms",
        "flexctr_default_b1_read_pct", "flexctr_default_b1_tensor", "flexctr_pad8_b1_busy", "flexctr_pad8mask_b1_ms",
        "flexdec_b1_default_over_cudnn", "flexdec_b1_forced_x", "flexdec_b1_paged_x", "flexdec_b1_tiles16_x",
        "flexdec_prefill_flex_default_tflops", "flexdec_prefill_n", "flexdec_prefill_tiles16_x",
        "flexdec_vllm_vs_paged_x", "flexgap_b1_product", "flexgap_b1_recipe", "flexgap_b1_rows",
        "flexgap_b1_split_inst", "flexgap_b1_total", "flexgap_b1_useful", "floor_extra_ms", "h200_ceiling_gbs",
        "h200_chunks", "h200_common_len", "h200_fa_itl_long", "h200_fa_itl_short", "h200_fa_kv_pct",
        "h200_fa_kv_rate", "h200_fa_long_len", "h200_flex_itl_long", "h200_flex_itl_short", "h200_flex_kv_pct",
        "h200_flex_kv_rate", "h200_flex_long_len", "h200_itl_fa3", "h200_short_len", "h200_ttft_common_fa",
        "h200_ttft_common_flex", "h200_ttft_fa2", "h200_ttft_ratio", "h200_vllm", "itl_flash_extra_ms",
        "itl_flex_extra_ms", "itl_gap_2k", "itl_gap_long", "itl_ratio_long", "batch_kv_bound_short",
        "batch_kv_bound_long", "kv_bound_below_32k", "kv_bound_from_32k", "kv_extra_gb", "request_ratio_long",
        "share_len", "ttft_ratio_short", "vllm_over_default"),
    "book/06c-our-kernels-in-vllm": (
        # the book's kernels as vLLM's backend (lab.book.pages.ch06c)
        "agree_calls", "agree_worst", "agree_tolerance", "bug_not_finite", "bug_calls", "ours_flash_kernels",
        "ours_long_n", "ours_ttft_ratio_long", "ours_itl_ratio_long", "race_last_chunk_speed", "race_decode1_speed",
        "race_decode16_speed", "chunk_ours_tensor", "chunk_fa3_tensor", "chunk_ours_warps",
        "chunk_fa3_warps", "gluon_race_last_chunk_speed", "gluon_ttft_ratio_long", "arms_long_n",
        "arms_ttft_ratio_131072", "mixed_chunks_speed", "mixed_split_speed", "sload_ours_top_rate",
        "sload_ours_top_p99_itl", "sload_fa3_near_p99_itl", "sload_fa3_near_rate", "sload_capacity_ratio",
        "sload_ours_burst_first", "sload_fa3_burst_first", "wload_capacity_ratio", "rload_capacity_ratio"),
    "book/06b-busy-server": (
        # the load study, the long prompt among decoders, the FP8 cache, and the method's settings the answers quote
        "bm_chunk", "bm_input_len", "bm_inter_ctx_hi", "bm_inter_ctx_lo", "bm_output_len", "curve_1_p99_ttft",
        "curve_1_rho", "curve_2_mm1", "curve_2_rho", "curve_3_p99_ttft", "curve_3_rho", "curve_4_mm1", "curve_4_rho",
        "curve_5_p99_ttft", "curve_5_rho", "curve_6_p50_tpot", "curve_6_p99_ttft", "curve_6_rho",
        "fa3_break_in_flight", "fa3_break_metric", "fa3_break_p99_tpot", "fa3_break_p99_ttft", "fa3_break_rate",
        "fa3_break_rho", "fa3_break_throughput", "fa3_capacity", "fa3_high_goodput", "fa3_high_rate",
        "fa3_high_throughput", "fa3_low_in_flight", "fa3_low_p50_tpot", "fa3_low_rate", "fa3_slo_in_flight",
        "fa3_slo_p99_tpot", "fa3_slo_p99_ttft", "fa3_slo_rate", "fa3_slo_rho", "flex_break_in_flight",
        "flex_break_metric", "flex_break_p99_tpot", "flex_break_p99_ttft", "flex_break_rate", "flex_break_rho",
        "flex_capacity", "flex_low_p50_tpot", "flex_slo_p99_tpot", "flex_slo_p99_ttft", "flex_slo_rate",
        "flex_slo_rho", "fp8_bf16_cache_tokens", "fp8_bf16_one_itl", "fp8_bf16_same_floor", "fp8_bf16_same_itl",
        "fp8_bf16_same_x_floor", "fp8_bf16_top_admitted", "fp8_bf16_top_floor", "fp8_bf16_top_n",
        "fp8_bf16_top_tok_s", "fp8_cache_x", "fp8_context", "fp8_e4m3_max", "fp8_fp8_cache_tokens", "fp8_fp8_one_itl",
        "fp8_fp8_same_floor", "fp8_fp8_same_itl", "fp8_fp8_same_x_floor", "fp8_fp8_top_admitted", "fp8_fp8_top_n",
        "fp8_fp8_top_tok_s", "fp8_same_floor_cut_pct", "fp8_same_itl_cut_pct", "fp8_same_n", "fp8_tok_s_gain",
        "inter_32l_decoders", "inter_32s_stall_cut", "inter_32s_ttft_cost", "inter_8l_decoders", "inter_8l_stall_cut",
        "inter_8l_ttft_cost", "inter_chunk_big", "inter_chunk_small", "inter_fa3_2048_32s_max",
        "inter_fa3_2048_32s_ttft", "inter_fa3_2048_8l_max", "inter_fa3_2048_8l_median", "inter_fa3_2048_8l_ttft",
        "inter_fa3_8192_32l_during_tok_s", "inter_fa3_8192_32l_max", "inter_fa3_8192_32l_median",
        "inter_fa3_8192_32l_steady", "inter_fa3_8192_32l_steady_tok_s", "inter_fa3_8192_32l_ttft",
        "inter_fa3_8192_32s_max", "inter_fa3_8192_32s_ttft", "inter_fa3_8192_8l_max", "inter_fa3_8192_8l_median",
        "inter_fa3_8192_8l_ttft", "inter_fa3_max", "inter_fa3_ttft", "inter_flex_max", "inter_flex_ttft",
        "inter_long_len", "inter_short_len", "inter_triton_max", "inter_triton_ttft", "kv_token_bf16", "kv_token_fp8",
        "slo_tpot_ms", "slo_ttft_ms", "triton_break_metric", "triton_break_p99_tpot", "triton_break_p99_ttft",
        "triton_break_rate", "triton_break_rho", "triton_capacity", "triton_slo_p99_tpot", "triton_slo_p99_ttft",
        "triton_slo_rate", "triton_slo_rho", "chunkcost_8l_per_step_ms", "inter_fa3_8192_8l_steady",
        "fp8_one_floor_cut_pct", "fp8_one_itl_cut_pct"),
    "book/07-the-trace": (
        "a10g_mm28_fa", "a10g_mm28_fx", "a10g_at28_fa", "a10g_at28_fx", "a10g_mm28_diff_pct", "a10g_at28_ratio",
        "a10g_decode_fa", "a10g_decode_fx", "naive_fa_s", "naive_fa_prefill_s", "q_heads", "kv_heads", "group",
        "h200_mm28_fa", "h200_mm28_fx", "h200_mm28_diff_pct", "h200_same_launches", "clock_fa_28k_mhz",
        "clock_fx_28k_mhz", "clock_fa_28k_capped", "clock_fa_28k_samples", "clock_fx_28k_capped",
        "clock_fx_28k_samples", "census_len"),
}
#: glue name -> the format this page shows it in, where its teaching page glued the bare number
SHOWN = {
    "h200_common_len": ",d",
    "h200_ttft_common_fa": ".2f",
    "h200_ttft_common_flex": ".2f",
    "h200_flex_itl_long": ".1f",
    "fa2_long_n": ",d",
    "fa2_ttft_ratio_long": ".2f",
    "h200_short_len": ",d",
    "h200_fa_long_len": ",d",
    "h200_fa_itl_short": ".1f",
    "h200_fa_itl_long": ".1f",
    "h200_flex_long_len": ",d",
    "h200_flex_itl_short": ".1f",
    "h200_ceiling_gbs": "{:,.0f} GB/s",
    "h200_fa_kv_rate": ",.0f",
    "h200_fa_kv_pct": ".0f",
    "h200_flex_kv_rate": ",.0f",
    "h200_flex_kv_pct": ".0f",
    "batch_64_kv_share": ".0f",
    "batch_1_floor_itl": "{:.1f} ms",
    "batch_64_floor_itl": "{:.1f} ms",
}
#: this page, as the fact registry names it
PAGE = "book/08-interview-prep"
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
    """What the answers derive from taught facts and no chapter states: the KV cache's size from the model's
    facts."""
    kv_bytes = taken["kv_kb"].value * 1024  # chapter 2's KiB per token, all layers
    return {"kv_mha_gb_32k": KV_IF_MHA.fact(taken["kv_gb_32k"].value * taken["group"].value, "32k"),
            "kv_equals_weights_tokens": KV_EQUALS_WEIGHTS.fact(taken["weights_streamed_gb"].value * 1e9 / kv_bytes),
            "page_kib_per_head": PAGE_PER_HEAD.fact(PAGE_TOKENS * taken["head_dim"].value * 2 / 1024)}


@functools.cache
def facts() -> dict[str, Fact]:
    """Every fact the interview page states, by glue name."""
    teaching = quoted(TAKEN, shown=SHOWN)
    return teaching | derived(teaching)

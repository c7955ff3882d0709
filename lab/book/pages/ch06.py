"""Chapter 6, vLLM sweeps: every fact the chapter and its self-check state, its figures, tables and explorers.

    glue_all(ch06.facts())          # the one hidden cell
    ch06.rig_table(), ch06.prefill_figure(), ch06.fit_table(), ch06.decode_figure(), ch06.decomposition_tables(),
    ch06.counter_table(), ch06.fa2_table(), ch06.floor_table(), ch06.tensor_parallel_figure(),
    ch06.concurrency_explorer(), ch06.sweep_explorer()

The runs it reads, each once: the published A10G study (data/reference/a10g-vllm0.11-qwen2.5-7b), our H200 sweeps
and their profiler windows (data/h200/vllm0.26-qwen2.5-7b), the chunk-size sweep (-chunk2048), the two-GPU sweep
(data/h200x2/vllm0.26-qwen2.5-7b-tp2), the concurrency sweep (-concurrency), the Flex decomposition
(data/h200/flex-decomposition) and its counters (lab.results.flex_counters), the value study
(data/h200/value-dependence), the mask study (data/h200/flex-masks) and the prefill race of record
(lab.results.kernel_runs.RACE) for Flex against cuDNN on plain causal attention.

Glue names other pages take from here (the interview page, the course kit): the ``a10g_*`` and ``h200_*`` fit and
decode facts (``h200_flex_kv_rate``: vLLM's FLEX arm's KV read rate, the sweep's ITL slope; ``h200_fa_kv_rate``),
``flex_vs_cudnn_causal`` (Flex's speed over cuDNN's with is_causal=True, race of record) with
``flex_causal_ms`` / ``cudnn_causal_ms``, the ``flexdec_*``, ``flexctr_*`` and ``flexgap_*`` facts of the Flex
section, ``chunk_*``, ``fa2_*``, ``batch_*``, ``tp_*`` and ``itlres_*`` (how finely an ITL median resolves).
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import pandas as pd

from lab.book.batch_explorer import concurrency_explorer as _concurrency_explorer
from lab.book.facts import Fact
from lab.book.plots.vllm import plot_decode, plot_prefill, plot_tensor_parallel
from lab.book.sweep_explorer import sweep_explorer as _sweep_explorer
from lab.measure.vllm import arms
from lab.results import census_windows as cw
from lab.results import concurrency as rc
from lab.results import flex_counters as fc
from lab.results import flex_decomposition as flexdec
from lab.results import iomodel, kernel_runs, probe_timing, roofline, value_dependence
from lab.results import sweep_variants as variants
from lab.results import sweeps as report
from lab.results.bandwidth import bandwidth_ceiling, ceiling, datasheet_bandwidth
from lab.results.data import DATA_DIR, load
from lab.results.hardware import device, load_measurement
from lab.results.modelshape import kv_per_token, qwen25_7b
from lab.results.quantities import Quantity

FA3, FLEX, FA2 = arms.FA3.label, arms.FLEX.label, arms.FA2.label
FLASH = arms.FLASH.label  # the A10G study's FLASH_ATTN, version left to vLLM
A10G_RUN, H200_RUN = report.A10G_STUDY, "h200/vllm0.26-qwen2.5-7b"
CHUNK_RUN, TP_RUN = "h200/vllm0.26-qwen2.5-7b-chunk2048", "h200x2/vllm0.26-qwen2.5-7b-tp2"
H200_CEILINGS = "h200/hardware"   # the H200's matmul ceiling (its bandwidth ceiling: lab.results.bandwidth)
SHAPE = "lab.results.modelshape: Qwen2.5-7B config.json"
SPECS = "lab.results.hardware"
CAUSAL_N = 16384                  # where the mask study and the race both timed Flex on plain causal attention
FLEX_VARIANTS = ("flex-default", "flex-forced", "flex-tiles16", "flex-paged", "flex-pad8", "sdpa-flash", "sdpa-cudnn")
#: The sweep points whose ITL medians the resolution check reads (the three that agree to the microsecond).
ITL_CHECKS = (("fa2_256", FA2, 256), ("fa2_512", FA2, 512), ("flex_256", FLEX, 256))

# --- the quantities chapter 6 teaches: one family per sweep (members: [arm, ...]) -----------------------------


def _sweep(gpu: str, run: str, provenance: str) -> dict[str, Quantity]:
    where = f"the {gpu.upper()} sweep, one request at a time"
    q = lambda key, means, unit, file="sweep.csv": Quantity(f"{gpu}.sweep.{key}", f"{means}, {where}",  # noqa: E731
                                                            run=run, file=file, unit=unit)
    fit = "of the least-squares fit TTFT = a + b n + c n² over the arm's prompt lengths (the fit, or its 95% interval)"
    return {"a": q("fit_a", f"the constant a {fit}", "ms"), "b": q("fit_b", f"the linear coefficient b {fit}", "µs/token"),
            "c": q("fit_c", f"the quadratic coefficient c {fit}", "ps/token²"),
            "c_ratio": q("c_ratio", "one arm's fitted c over another's", "×"),
            "share": q("quadratic_share", "c n² / (b n + c n²) of an arm's fit at a prompt length", "%"),
            "b_eff": q("matmul_efficiency", "the matmul FLOPs of one token at the datasheet bf16 peak over the fitted b",
                       "%"),
            "c_eff": q("attention_efficiency", "the causal attention FLOPs per token² at the datasheet peak over the "
                       "fitted c", "%"),
            "ttft": q("ttft", "median TTFT of the repetitions at a prompt length", "s"),
            "ttft_ratio": q("ttft_ratio", "one arm's TTFT over another's at a prompt length", "×"),
            "ttft_extra": q("ttft_extra", "how much longer one arm's TTFT is than another's at a prompt length", "%"),
            "itl": q("itl", "median inter-token gap pooled over the repetitions' decode gaps at a context length", "ms"),
            "itl_growth": q("itl_growth", "an arm's ITL at its longest context over its shortest, minus one", "%"),
            "itl_ratio": q("itl_ratio", "one arm's ITL over another's at a context length", "×"),
            "length": q("length", "a prompt length the sweep ran (its target length)", "tokens"),
            "x_floor": q("over_floor", "a measured TTFT or ITL over its roofline floor", "×"),
            "setting": q("setting", "a setting of the sweep as its provenance records it", "", provenance),
            "ready": q("server_ready", "seconds from an arm's server start to its first answer", "s",
                       "<arm>/provenance.json")}


A10G = _sweep("a10g", A10G_RUN, "provenance.json")
H200 = _sweep("h200", H200_RUN, "<arm>/provenance.json")
_CHUNK = dict(run=CHUNK_RUN, file=f"{arms.FA3.slug}/sweep.csv")
CHUNK_FIT = {"a": Quantity("h200.chunk2048.fit_a", "the constant a of FA3's fit with prefill chunks of 2,048 tokens",
                           unit="ms", **_CHUNK),
             "b": Quantity("h200.chunk2048.fit_b", "the linear coefficient b of that fit", unit="µs/token", **_CHUNK),
             "c": Quantity("h200.chunk2048.fit_c", "the quadratic coefficient c of that fit", unit="ps/token²",
                           **_CHUNK)}
CHUNK_SIZE = Quantity("h200.chunk2048.chunk", "the prefill chunk (max_num_batched_tokens) of the chunk-size sweep's "
                      "server", run=CHUNK_RUN, file=f"{arms.FA3.slug}/provenance.json", unit="tokens")
CHUNK_RATIO = Quantity("h200.chunk2048.ratio", "a coefficient with chunks of 2,048 tokens over the same with the main "
                       "sweep's chunks", unit="×", **_CHUNK)
CHUNK_ADDED = Quantity("h200.chunk2048.c_added", "the quadratic time the small chunks add at a prompt length: "
                       "(c_small - c_large) n²", unit="ms", **_CHUNK)
CHUNK_REREAD = Quantity("h200.chunk2048.reread", "the cached prefix read once more per chunk (compulsory K/V bytes, "
                        "lab.results.iomodel.chunked_prefill_bytes) at the H200's bandwidth ceiling: small chunks "
                        "minus large", unit="ms", **_CHUNK)
CHUNK_REREAD_SHARE = Quantity("h200.chunk2048.reread_share", "that re-read time over the quadratic time the small "
                              "chunks added", unit="%", **_CHUNK)
_TP = dict(run=TP_RUN, file=f"{arms.FA3.slug}/sweep.csv")
TP_TTFT_RATIO = Quantity("h200x2.tp.ttft_ratio", "TTFT on one H200 over TTFT split over two (FA3)", unit="×", **_TP)
TP_ITL = Quantity("h200x2.tp.itl", "a decode step's ITL on one H200 or split over two (FA3)", unit="ms", **_TP)
TP_GAP = Quantity("h200x2.tp.over_floor_ms", "a decode step's ITL minus its own floor, on one or two H200s", unit="ms",
                  **_TP)
TP_OVERHEAD = Quantity("h200x2.tp.overhead", "the two-GPU step's time above its floor minus the one-GPU step's",
                       unit="ms", **_TP)
TP_LENGTH = Quantity("h200x2.tp.length", "a prompt length both the one- and two-GPU sweeps ran", unit="tokens", **_TP)
TP_WINDOW = Quantity("h200x2.tp.window_ms", "GPU time of a kernel family in one 8,192-token prefill window of one of "
                     "the two GPUs (census)", run=TP_RUN, file=f"traces/{arms.FA3.slug}/census.csv", unit="ms")
TP_COMM_PCT = Quantity("h200x2.tp.comm_pct", "NCCL's share of that window", run=TP_RUN,
                       file=f"traces/{arms.FA3.slug}/census.csv", unit="%")
TP_COMM_LAUNCHES = Quantity("h200x2.tp.comm_launches", "collective kernels launched in that window", run=TP_RUN,
                            file=f"traces/{arms.FA3.slug}/census.csv", unit="kernels")
ONE_WINDOW = Quantity("h200.census.prefill_window_ms", "GPU time of a kernel family in one 8,192-token prefill window "
                      "on one H200 (census)", run=H200_RUN, file=f"traces/{arms.FA3.slug}/census.csv", unit="ms")
_TRACES = dict(run=H200_RUN, file=f"traces/{arms.FLEX.slug}")
VLLM_TOKENS = Quantity("h200.vllm_flex.window_tokens", "the context of the profiler windows the Flex section reads",
                       unit="tokens", **_TRACES)
VLLM_STEP_MS = Quantity("h200.vllm_flex.decode_attention_ms", "attention's GPU time per decode step in vLLM's FLEX "
                        "arm's decode window", unit="ms", **_TRACES)
VLLM_PREFILL_TFLOPS = Quantity("h200.vllm.prefill_attention_tflops", "causal attention FLOPs of the window's prompt "
                               "over attention's GPU time in its prefill window", unit="TFLOP/s", run=H200_RUN,
                               file="traces/<arm>")
VLLM_KERNEL_MS = Quantity("h200.vllm_flex.kernel_ms", "one call of vLLM's Flex attention kernel in the decode window",
                          unit="ms", **_TRACES)
VLLM_PROGRAMS = Quantity("h200.vllm_flex.programs", "programs in the grid of vLLM's Flex kernel", unit="programs",
                         **_TRACES)
VLLM_ROWS = Quantity("h200.vllm_flex.prefill_rows", "query rows per program of vLLM's Flex prefill kernel: the chunk "
                     "over the grid's query tiles", unit="rows", **_TRACES)
_DEC = dict(run=flexdec.DATASET, file=flexdec.FILE)
DEC_LENGTH = Quantity("h200.flex_decomposition.length", "the context (decode) or prompt (prefill) of the Flex "
                      "decomposition", unit="tokens", **_DEC)
DEC_GBS = Quantity("h200.flex_decomposition.kv_rate", "K/V bytes of one decode call over its time", unit="GB/s", **_DEC)
DEC_PCT = Quantity("h200.flex_decomposition.pct_of_ceiling", "that rate over the H200's read-stream ceiling", unit="%",
                   **_DEC)
DEC_MS = Quantity("h200.flex_decomposition.ms", "one call of a variant, median of interleaved rounds", unit="ms", **_DEC)
DEC_PROGRAMS = Quantity("h200.flex_decomposition.programs", "programs in the grid of a variant's attention kernel",
                        unit="programs", **_DEC)
DEC_EXTRA = Quantity("h200.flex_decomposition.extra_kernels", "kernels a variant launches besides its attention "
                     "kernel (the decoding template's merges)", unit="kernels", **_DEC)
DEC_TFLOPS = Quantity("h200.flex_decomposition.tflops", "causal FLOPs of one prefill call over its time",
                      unit="TFLOP/s", **_DEC)
DEC_ROWS = Quantity("h200.flex_decomposition.rows", "query rows per program of a variant's prefill kernel",
                    unit="rows", **_DEC)
DEC_VLLM = Quantity("h200.flex_decomposition.vllm_over_paged", "vLLM's FLEX arm's K/V read rate (trace) over the "
                    "standalone flex-paged call's", unit="×", **_DEC)
VALUES_PCT = Quantity("h200.value_dependence.largest_change", "the largest change of an op's time against random "
                      "inputs, over the input kinds", run=value_dependence.DATASET, file=value_dependence.FILE, unit="%")
B_AT_CEILING = Quantity("h200.sweep.b_at_matmul_ceiling", "the matmul FLOPs of one Qwen2.5-7B token at the H200's "
                        "measured matmul ceiling: the least b can be", run=roofline.MATMUL_RUN, file="measurements.json",
                        unit="µs/token")
WEIGHTS_FLOOR = Quantity("h200.decode.weights_floor", "the weights one decode step streams (every layer's matmuls and "
                         "the LM head), split over that many GPUs, at the H200's bandwidth ceiling", run="h200/bandwidth",
                         file="read_stream.csv", unit="ms")
ITL_RES = Quantity("h200.sweep.itl_median_resolution", "how finely a sweep point's pooled ITL median is known: its "
                   "gaps, tokens per streamed chunk, the step the chunk times are recorded to (µs), the median's "
                   "bootstrap 95% half-width (µs)", run=H200_RUN, file="<arm>/measurements.jsonl")


# --- the runs, each read once ------------------------------------------------------------------------------

@functools.cache
def _table():
    return report.sweep_table()


@functools.cache
def _h200_study() -> str:
    return report.find_study(_table(), "H200")


@functools.cache
def _decomposition(root: Path = DATA_DIR):
    return flexdec.read(root)


@functools.cache
def _concurrency():
    bandwidth, _ = rc.floor_bandwidth()
    return rc.with_floor(rc.load_points(), bandwidth)


def _fit(table, study: str):
    return report.fit_summary(table, study).set_index("arm")


# --- facts: setup and the A10G prefill -----------------------------------------------------------------------

def setup_facts() -> dict:
    table, h200 = _table(), _h200_study()
    shape, flags, h200_flags = qwen25_7b(), report.provenance(table, A10G_RUN)["flags"], report.provenance(table, h200)["flags"]
    setting = lambda q, key, value, fmt="": q["setting"].fact(value, key, fmt=fmt)  # noqa: E731
    return {"layers": Fact(shape.layers, SHAPE), "q_heads": Fact(shape.q_heads, SHAPE),
            "kv_heads": Fact(shape.kv_heads, SHAPE), "head_dim": Fact(shape.head_dim, SHAPE),
            "kv_bytes_per_token": kv_per_token(), "weights_gb": Fact(shape.parameters * 2 / 1e9, SHAPE),
            "a10g_chunk": setting(A10G, "max_num_batched_tokens", report.chunk_size(table, A10G_RUN)),
            "a10g_max_model_len": setting(A10G, "max_model_len", flags["max_model_len"]),
            "gen_tokens": setting(A10G, "gen_tokens", flags["gen_tokens"]),
            "reps": setting(H200, "reps", h200_flags["reps"]), "long_reps": setting(H200, "long_reps", h200_flags["long_reps"]),
            "long_from": setting(H200, "long_from", h200_flags["long_from"]),
            "h200_chunk": setting(H200, "max_num_batched_tokens", report.chunk_size(table, h200))}


def _fit_facts(q: dict, prefix: str, fits, names: tuple[tuple[str, str], ...]) -> dict:
    out = {}
    for name, arm in names:
        row = fits.loc[arm]
        out |= {f"{prefix}_{name}_b": q["b"].fact(row["b_us_per_token"], arm, "fit"),
                f"{prefix}_{name}_b_lo": q["b"].fact(row["b_lo"], arm, "95% low"),
                f"{prefix}_{name}_b_hi": q["b"].fact(row["b_hi"], arm, "95% high"),
                f"{prefix}_{name}_c": q["c"].fact(row["c_ps_per_token2"], arm, "fit"),
                f"{prefix}_{name}_c_lo": q["c"].fact(row["c_lo"], arm, "95% low"),
                f"{prefix}_{name}_c_hi": q["c"].fact(row["c_hi"], arm, "95% high")}
    return out


def a10g_prefill_facts() -> dict:
    table = _table()
    fits, floor, gpu = _fit(table, A10G_RUN), report.floors(report.provenance(table, A10G_RUN)["gpu"], [1000]), device("A10G")
    ttft = {arm: report.arm_rows(table, A10G_RUN, arm).set_index("target_len")["ttft_s"] for arm in (FLASH, FLEX)}
    out = _fit_facts(A10G, "a10g", fits, (("fa", FLASH), ("flex", FLEX)))
    for name, arm in (("fa", FLASH), ("flex", FLEX)):
        row = fits.loc[arm]
        out |= {f"a10g_{name}_share_2k": A10G["share"].fact(row["share_2048_pct"], arm, 2048),
                f"a10g_{name}_share_32k": A10G["share"].fact(row["share_32768_pct"], arm, 32768),
                f"a10g_{name}_matmul_eff": A10G["b_eff"].fact(floor["b_floor"] * 1e6 / row["b_us_per_token"] * 100, arm),
                f"a10g_{name}_attn_eff": A10G["c_eff"].fact(floor["c_floor"] * 1e12 / row["c_ps_per_token2"] * 100, arm)}
    fa, flex, longest = ttft[FLASH], ttft[FLEX], int(fits.loc[FLASH, "longest"])
    return out | {
        "a10g_c_ratio": A10G["c_ratio"].fact(fits.loc[FLEX, "c_ps_per_token2"] / fits.loc[FLASH, "c_ps_per_token2"], FLEX, FLASH),
        "a10g_b_floor": Fact(floor["b_floor"] * 1e6, "lab.results.sweeps.floors"),
        "a10g_c_floor": Fact(floor["c_floor"] * 1e12, "lab.results.sweeps.floors"),
        "a10g_peak_tflops": Fact(gpu.bf16_flops / 1e12, SPECS),
        "a10g_longest": A10G["length"].fact(longest, "longest"),
        "a10g_ttft_2k_fa": A10G["ttft"].fact(fa.loc[2048], FLASH, 2048),
        "a10g_ttft_2k_flex": A10G["ttft"].fact(flex.loc[2048], FLEX, 2048),
        "a10g_ttft_2k_gap": A10G["ttft_extra"].fact((flex.loc[2048] / fa.loc[2048] - 1) * 100, FLEX, FLASH, 2048),
        "a10g_ttft_long_fa": A10G["ttft"].fact(fa.iloc[-1], FLASH, int(fa.index[-1])),
        "a10g_ttft_long_flex": A10G["ttft"].fact(flex.iloc[-1], FLEX, int(flex.index[-1])),
        "a10g_ttft_long_ratio": A10G["ttft_ratio"].fact(flex.iloc[-1] / fa.iloc[-1], FLEX, FLASH, int(fa.index[-1]))}


# --- facts: the H200 prefill and decode ------------------------------------------------------------------------

def h200_prefill_facts() -> dict:
    table, h200 = _table(), _h200_study()
    fits, floor = _fit(table, h200), report.floors(report.provenance(table, h200)["gpu"], [1000])
    fa, flex = fits.loc[FA3], fits.loc[FLEX]
    fa_rows, flex_rows = report.arm_rows(table, h200, FA3), report.arm_rows(table, h200, FLEX).set_index("target_len")
    common = int(max(set(flex_rows.index) & set(fa_rows["target_len"])))
    longest = int(fa_rows["actual_len"].max())
    c_per_b = fa["c_ps_per_token2"] * 1e-12 * longest / (fa["b_us_per_token"] * 1e-6)
    overlap = fits.loc[[FA3, FLEX], "b_lo"].max() <= fits.loc[[FA3, FLEX], "b_hi"].min()
    ceilings = load_measurement(f"data/{H200_CEILINGS}")
    b_held = qwen25_7b().linear_flops_per_token() / ceilings.peak_flops
    trade = variants.tradeoff(table, h200, FLEX, b_held)
    out = _fit_facts(H200, "h200", fits, (("fa", FA3), ("flex", FLEX)))
    return out | {
        "h200_fa_a_ms": H200["a"].fact(1e3 * fa["a_s"], FA3, "fit"), "h200_flex_a_ms": H200["a"].fact(1e3 * flex["a_s"], FLEX, "fit"),
        "h200_fa_b_eff": H200["b_eff"].fact(floor["b_floor"] * 1e6 / fa["b_us_per_token"] * 100, FA3),
        "h200_flex_b_eff": H200["b_eff"].fact(floor["b_floor"] * 1e6 / flex["b_us_per_token"] * 100, FLEX),
        "h200_peak_tflops": Fact(device("H200-SXM").bf16_flops / 1e12, SPECS),
        "h200_b_intervals": Fact("overlap" if overlap else "do not overlap", H200["b"].source),
        "h200_c_ratio": H200["c_ratio"].fact(flex["c_ps_per_token2"] / fa["c_ps_per_token2"], FLEX, FA3),
        "h200_common_len": H200["length"].fact(common, "longest both FA3 and FLEX ran"),
        "h200_ttft_common_flex": H200["ttft"].fact(flex_rows.loc[common, "ttft_s"], FLEX, common),
        "h200_ttft_common_fa": H200["ttft"].fact(fa_rows.set_index("target_len").loc[common, "ttft_s"], FA3, common),
        "h200_fa3_longest": H200["length"].fact(longest, "longest FA3 ran"),
        "h200_fa3_ttft_longest": H200["ttft"].fact(fa_rows["ttft_s"].iloc[-1], FA3, longest),
        "h200_fa_share_32k": H200["share"].fact(fa["share_32768_pct"], FA3, 32768),
        "h200_fa_share_longest": H200["share"].fact(100 * c_per_b / (1 + c_per_b), FA3, longest),
        "h200_corr_bc": Fact(trade.corr_bc, "lab.results.sweep_variants.coefficient_correlation"),
        "h200_matmul_ceiling_tflops": roofline.matmul_ceiling().to("TFLOP/s"),
        "h200_b_at_ceiling": B_AT_CEILING.fact(b_held * 1e6),
        "h200_flex_c_at_ceiling": Fact(trade.c_at_b * 1e12, "lab.results.sweep_variants.refit_with_b"),
        "h200_flex_c_shift_pct": Fact(trade.c_shift_pct, "lab.results.sweep_variants.refit_with_b")}


def _target_len(table, study: str, arm: str, actual_len) -> int:
    """The target length of the sweep row that ran ``actual_len`` tokens."""
    rows = report.arm_rows(table, study, arm)
    return int(rows.loc[rows["actual_len"] == actual_len, "target_len"].iloc[0])


def decode_facts() -> dict:
    table, h200 = _table(), _h200_study()
    shape, a10g_gpu, h200_gpu = qwen25_7b(), device("A10G"), device("H200-SXM")
    out = {}
    for gpu, study, q, named in (("a10g", A10G_RUN, A10G, (("fa", FLASH), ("flex", FLEX))),
                                 ("h200", h200, H200, (("fa", FA3), ("flex", FLEX)))):
        fits = _fit(table, study)
        nominal = lambda arm, column, s=study, f=fits: _target_len(table, s, arm, f.loc[arm, column])  # noqa: E731
        for name, arm in named:
            row = fits.loc[arm]
            short, long = nominal(arm, "short_len"), nominal(arm, "long_len")
            out |= {f"{gpu}_{name}_itl_short": q["itl"].fact(row["itl_short_ms"], arm, short),
                    f"{gpu}_{name}_itl_long": q["itl"].fact(row["itl_long_ms"], arm, long),
                    f"{gpu}_{name}_itl_growth": q["itl_growth"].fact(row["itl_growth_pct"], arm),
                    f"{gpu}_{name}_kv_rate": report.kv_read_fact(table, study, arm),
                    f"{gpu}_{name}_kv_pct": report.kv_read_pct_fact(table, study, arm)}
        # the lengths as the study names them (its target lengths; the A10G's prompts ran a token longer)
        out[f"{gpu}_short_len"] = q["length"].fact(nominal(fits.index[0], "short_len"), "shortest")
        out[f"{gpu}_fa_long_len"] = q["length"].fact(nominal(named[0][1], "long_len"), f"longest {named[0][1]}")
        out[f"{gpu}_flex_long_len"] = q["length"].fact(nominal(FLEX, "long_len"), f"longest {FLEX}")
    itl2k = {arm: report.arm_rows(table, A10G_RUN, arm).set_index("target_len").loc[2048, "itl_ms"] for arm in (FLASH, FLEX)}
    long_len = out["a10g_fa_long_len"].value
    out |= {"a10g_fa_itl_2k": A10G["itl"].fact(itl2k[FLASH], FLASH, 2048),
            "a10g_flex_itl_2k": A10G["itl"].fact(itl2k[FLEX], FLEX, 2048),
            "a10g_bandwidth": bandwidth_ceiling(a10g_gpu).to("GB/s"),
            "h200_bandwidth_tb": datasheet_bandwidth(h200_gpu).to("TB/s"),
            "h200_ceiling_gbs": bandwidth_ceiling(h200_gpu).to("GB/s"),
            "a10g_decode_floor_short": rc.floor_fact(1, out["a10g_short_len"].value, "A10G"),
            "a10g_decode_floor_long": rc.floor_fact(1, long_len, "A10G"),
            "a10g_kv_long_gb": Fact(long_len * shape.kv_bytes_per_token() / 1e9, "lab.results.modelshape"),
            "a10g_kv_rate_ratio": Fact(out["a10g_fa_kv_rate"].value / out["a10g_flex_kv_rate"].value,
                                       "lab.results.sweeps.kv_read_rate: a10g_fa_kv_rate over a10g_flex_kv_rate"),
            "a10g_sms": Fact(a10g_gpu.sm_count, SPECS), "h200_sms": Fact(h200_gpu.sm_count, SPECS),
            "group": Fact(shape.q_heads // shape.kv_heads, SHAPE)}
    for gpu_name, gpu in (("a10g", a10g_gpu), ("h200", h200_gpu)):
        out[f"{gpu_name}_min_splits_groups"] = Fact(math.ceil(gpu.sm_count / shape.kv_heads), SPECS)
    return out


def itl_resolution_facts() -> dict:
    """Whether the sweep's ITL medians are quantised: three points that read the same median to the microsecond."""
    table, h200, out = _table(), _h200_study(), {}
    for key, arm, n in ITL_CHECKS:
        dataset = str(report.arm_rows(table, h200, arm)["dataset"].iloc[0])
        found = probe_timing.resolution(dataset, n)
        get = lambda attr, f=found: getattr(f, attr) if f else None  # noqa: E731
        out |= {f"itlres_{key}_gaps": ITL_RES.fact(get("gaps"), arm, n, "gaps", fmt="d"),
                f"itlres_{key}_tokens": ITL_RES.fact(get("most_tokens_per_chunk"), arm, n, "tokens per chunk", fmt="d"),
                f"itlres_{key}_step_us": ITL_RES.fact(get("clock_step_us"), arm, n, "clock step", fmt="{:.0f} µs"),
                f"itlres_{key}_half_us": ITL_RES.fact(get("half_width_us"), arm, n, "median half-width",
                                                      fmt="{:.0f} µs"),
                f"itlres_{key}_ms": H200["itl"].fact(report.arm_rows(table, h200, arm).set_index("target_len")
                                                     .loc[n, "itl_ms"], arm, n, fmt="{:.3f} ms")}
    return out


# --- facts: vLLM's FLEX arm and the decomposition ----------------------------------------------------------------

def flex_arm_facts(root: Path = DATA_DIR) -> dict:
    """vLLM's FLEX arm from our traces, and the standalone decomposition (under ``root``) when it is on file."""
    vllm, fa3, dec = flexdec.vllm_flex(), flexdec.vllm_flex(backend="FlashAttention", arm=FA3), _decomposition(root)
    out = {"vllm_flex_tokens": VLLM_TOKENS.fact(vllm.tokens),
           "vllm_flex_step_ms": VLLM_STEP_MS.fact(vllm.decode_ms_per_step, vllm.tokens, fmt="{:.0f} ms"),
           "vllm_flex_prefill_tflops": VLLM_PREFILL_TFLOPS.fact(vllm.prefill_tflops, FLEX, vllm.tokens, fmt=".0f"),
           "vllm_fa3_prefill_tflops": VLLM_PREFILL_TFLOPS.fact(fa3.prefill_tflops, FA3, vllm.tokens, fmt=".0f"),
           "flexdec_status": Fact(f"measured on the {dec.gpu} ({dec.source})" if dec else None, DEC_MS.source),
           "flexdec_decode_n": DEC_LENGTH.fact(dec.length("decode") if dec else None, "decode", fmt=",d"),
           "flexdec_prefill_n": DEC_LENGTH.fact(dec.length("prefill") if dec else None, "prefill", fmt=",d"),
           "flexdec_pow2_checked": Fact({True: "does", False: "does not"}.get(dec.torch_checks_power_of_two() if dec else None),
                                        f"data/{flexdec.DATASET}/provenance.json: flags.sources"),
           "flexdec_vllm_vs_paged_x": DEC_VLLM.fact(flexdec.vllm_over(dec, vllm) if dec else None, fmt="{:.2f}×")}
    for batch in (1, 16):
        out |= _flex_decode(dec, batch)
    return out | _flex_prefill(dec) | _vllm_flex_kernels() | _flex_concurrency()


def _flex_decode(dec, batch: int) -> dict:
    """One decode batch of the decomposition: rates and their share of the read ceiling, times, programs, factors."""
    read_gbs, out = ceiling("H200-SXM") / 1e9, {}
    for variant in FLEX_VARIANTS:
        key, member = f"flexdec_b{batch}_{variant.replace('-', '_')}", ("decode", batch, variant)
        rate = dec.rate(*member) if dec else None
        out |= {f"{key}_gbs": DEC_GBS.fact(rate, *member, fmt="{:,.0f} GB/s"),
                f"{key}_pct": DEC_PCT.fact(100 * rate / read_gbs if rate else None, *member, fmt="{:.1f}%"),
                f"{key}_ms": DEC_MS.fact(dec.ms(*member) if dec else None, *member, fmt="{:.3f} ms"),
                f"{key}_programs": DEC_PROGRAMS.fact(dec.programs(*member) if dec else None, *member, fmt="{:,d}")}
    for slow, fast, _ in (*flexdec.STEPS, flexdec.DECODE_TEMPLATE):
        out[f"flexdec_b{batch}_{slow.split('-')[1]}_x"] = _factor(dec, "decode", batch, slow, fast, ".2f")
    for fast in ("flex-pad8", "sdpa-cudnn"):  # how many times faster than the general kernel
        out[f"flexdec_b{batch}_default_over_{fast.split('-')[1]}"] = _factor(dec, "decode", batch, "flex-default",
                                                                             fast, ".1f")
    out[f"flexdec_b{batch}_pad8_combine"] = DEC_EXTRA.fact(dec.extra_kernels("decode", batch, "flex-pad8") if dec
                                                           else None, "decode", batch, "flex-pad8", fmt="d")
    return out


def _flex_prefill(dec) -> dict:
    batch = (dec.batches("prefill") or [1])[0] if dec else 1  # the prefill rows' batch, whatever it is
    out = {}
    for variant in FLEX_VARIANTS:
        key, member = f"flexdec_prefill_{variant.replace('-', '_')}", ("prefill", batch, variant)
        grid = dec.grid(*member) if dec else None  # (query tiles, batch, heads)
        out |= {f"{key}_tflops": DEC_TFLOPS.fact(dec.rate(*member) if dec else None, *member, fmt="{:.0f} TFLOP/s"),
                f"{key}_ms": DEC_MS.fact(dec.ms(*member) if dec else None, *member, fmt="{:,.1f} ms"),
                f"{key}_programs": DEC_PROGRAMS.fact(dec.programs(*member) if dec else None, *member, fmt="{:,d}"),
                f"{key}_rows": DEC_ROWS.fact(dec.length("prefill") / grid[0] if grid else None, *member, fmt=".0f")}
    for slow, fast, _ in flexdec.STEPS:
        out[f"flexdec_prefill_{slow.split('-')[1]}_x"] = _factor(dec, "prefill", batch, slow, fast,
                                                                 ".2f" if slow == "flex-forced" else ".1f")
    return out


def _factor(dec, phase: str, batch: int, slow: str, fast: str, fmt: str) -> Fact:
    """One time ratio of the decomposition, glued as "2.1×" (not measured while the decomposition is not)."""
    return (dec.factor_fact(phase, batch, slow, fast) if dec else Fact(None, DEC_MS.source)).shown_as("{:" + fmt + "}×")


def _vllm_flex_kernels() -> dict:
    """vLLM's own Flex kernel in the 28k windows: its grid, and the query rows per program it implies."""
    tokens = flexdec.VLLM_WINDOW_TOKENS
    decode, prefill = flexdec.vllm_kernels(f"decode-{tokens}"), flexdec.vllm_kernels(f"prefill-{tokens}")
    main, chunk = (decode[0] if decode else None), (prefill[0] if prefill else None)  # most calls: the full chunks
    rows = report.chunk_size(_table(), _h200_study()) / chunk.grid[0] if chunk else None
    return {"vllm_flex_decode_grid": Fact(list(main.grid) if main else None, VLLM_PROGRAMS.source),
            "vllm_flex_decode_programs": VLLM_PROGRAMS.fact(main.programs if main else None, "decode", fmt="d"),
            "vllm_flex_decode_kernel_ms": VLLM_KERNEL_MS.fact(main.ms_per_call if main else None, fmt="{:.2f} ms"),
            "vllm_flex_prefill_grid": Fact(list(chunk.grid) if chunk else None, VLLM_PROGRAMS.source),
            "vllm_flex_prefill_rows": VLLM_ROWS.fact(rows, fmt=".0f")}


def _flex_concurrency() -> dict:
    """vLLM's FLEX arm with several requests: ITL by context and number of requests."""
    table, out = _concurrency(), {}
    for context in (2048, 32768):
        for requests in (1, 4, 16, 64):
            point = rc.point(table, FLEX, context, requests)
            out[f"flexconc_{context}_{requests}"] = rc.POINT_ITL.fact(point["itl_ms"] if point else None, FLEX,
                                                                      context, requests, fmt="{:.1f} ms")
    return out


def flex_vs_cudnn_facts() -> dict:
    """FlexAttention on plain causal attention against SDPA's fastest backend there, cuDNN with is_causal=True, at
    the same shape in the race of record (the mask study gave cuDNN a dense mask even on the causal row)."""
    race = load(kernel_runs.RACE).csv("prefill.csv", ["candidate", "n", "status", "ms"])
    ms = lambda who: float(race[(race.candidate == who) & (race.n == CAUSAL_N)].ms.iloc[0])  # noqa: E731
    length = f"{CAUSAL_N // 1024}k"
    return {"causal_n": Fact(CAUSAL_N, "lab.book.pages.ch06.CAUSAL_N", "{:,d}"),
            "flex_vs_cudnn_causal": kernel_runs.SPEED_VS_CUDNN.fact(kernel_runs.speed_vs(race, "flex", "sdpa-cudnn", CAUSAL_N),
                                                                    "flex", length, fmt="{:.2f}×"),
            "flex_causal_ms": kernel_runs.PREFILL_MS.fact(ms("flex"), "flex", length, fmt="{:.2f} ms"),
            "cudnn_causal_ms": kernel_runs.PREFILL_MS.fact(ms("sdpa-cudnn"), "sdpa-cudnn", length, fmt="{:.2f} ms")}


# --- facts: the value study, chunking, FA2, floors, batching, two GPUs ---------------------------------------------

def values_facts(root: Path = DATA_DIR) -> dict:
    data = value_dependence.read(root)
    out = {"values_status": Fact(f"measured ({data.source})" if data else None, VALUES_PCT.source)}
    ops = data.ops() if data else []
    matmul = next((op for op in ops if "matmul" in op.lower() or "mm" in op.lower()), None)
    kernel = next((op for op in ops if op != matmul), None)  # the other op: our attention kernel
    for key, op in (("matmul", matmul), ("kernel", kernel)):
        watts = data.power_range(op) if op else None
        out |= {f"values_{key}_op": Fact(op, VALUES_PCT.source),
                f"values_{key}_max_pct": VALUES_PCT.fact(data.largest_change_pct(op) if op else None, op, fmt="{:.1f}%"),
                f"values_{key}_power": Fact(f"{watts[0]:.0f} to {watts[1]:.0f} W" if watts else None, VALUES_PCT.source)}
    return out


def chunk_facts(n: int = 32768) -> dict:
    """FA3 with the A10G's small chunks against the main sweep's, and how much of the added quadratic time the
    cached prefix read once more per chunk explains."""
    comparison = variants.chunk_comparison(_table())
    out = {"chunk_status": Fact("measured" if comparison else None, CHUNK_RATIO.source),
           "chunk_small": CHUNK_SIZE.fact(comparison.small_chunk if comparison else None, fmt="d"),
           "chunk_large": H200["setting"].fact(comparison.large_chunk if comparison else None,
                                               "max_num_batched_tokens", fmt="d")}
    small, large = (comparison.small, comparison.large) if comparison else (None, None)
    out |= {"chunk_small_a": CHUNK_FIT["a"].fact(small.a * 1e3 if small else None, fmt="{:.1f} ms"),
            "chunk_small_b": CHUNK_FIT["b"].fact(small.b_us_per_token if small else None, fmt="{:.2f} µs/token"),
            "chunk_small_c": CHUNK_FIT["c"].fact(small.c_ps_per_token2 if small else None, fmt="{:.0f} ps/token²"),
            "chunk_large_a": H200["a"].fact(large.a * 1e3 if large else None, FA3, "fit", fmt="{:.1f} ms"),
            "chunk_large_b": H200["b"].fact(large.b_us_per_token if large else None, FA3, "fit", fmt="{:.2f} µs/token"),
            "chunk_large_c": H200["c"].fact(large.c_ps_per_token2 if large else None, FA3, "fit",
                                            fmt="{:.0f} ps/token²")}
    for coefficient in ("a", "b", "c"):
        moved = None if comparison is None else ("moved" if comparison.moved(coefficient) else "did not move")
        out[f"chunk_{coefficient}_moved"] = Fact(moved, CHUNK_RATIO.source)
        out[f"chunk_{coefficient}_ratio"] = CHUNK_RATIO.fact(comparison.ratio(coefficient) if comparison else None,
                                                             coefficient, fmt="{:.2f}×")
    return out | _chunk_reread(comparison, n)


def _chunk_reread(comparison, n: int) -> dict:
    shape = qwen25_7b()
    block = iomodel.flash_block_size(shape.head_dim, device("H200-SXM").smem_per_sm, 2)

    def extra_ms(chunk: int) -> float:
        counts = iomodel.chunked_prefill_bytes(shape, n, chunk, block)
        return 1e3 * shape.layers * (counts["chunked"]["compulsory"] - counts["single"]["compulsory"]) / ceiling("H200-SXM")

    reread = extra_ms(comparison.small_chunk) - extra_ms(comparison.large_chunk) if comparison else None
    added = 1e3 * (comparison.small.c - comparison.large.c) * n**2 if comparison else None
    return {"chunk_eval_n": Fact(n, "lab.book.pages.ch06.chunk_facts"),
            "chunk_c_added_ms": CHUNK_ADDED.fact(added, n, fmt="{:.0f} ms"),
            "chunk_reread_ms": CHUNK_REREAD.fact(reread, n, fmt="{:.1f} ms"),
            "chunk_reread_pct": CHUNK_REREAD_SHARE.fact(100 * reread / added if added else None, n, fmt="{:.0f}%")}


def fa2_facts() -> dict:
    table, h200 = _table(), _h200_study()
    versus, fits = report.compare_arms(table, h200, FA2, FA3), _fit(table, h200)
    ready = {arm: (report.provenance(table, h200, arm).get("server") or {}).get("ready_s") for arm in (FA2, FA3)}
    longest, shortest = versus.iloc[-1], versus.iloc[0]
    c = fits["c_ps_per_token2"]
    return {"fa2_long_n": H200["length"].fact(int(longest["n"]), "longest FA2 and FA3 both ran"),
            "fa2_short_n": H200["length"].fact(int(shortest["n"]), "shortest FA2 and FA3 both ran"),
            "fa2_ttft_ratio_long": H200["ttft_ratio"].fact(longest["TTFT ratio"], FA2, FA3, int(longest["n"])),
            "fa2_c": H200["c"].fact(c[FA2], FA2, "fit"), "fa3_c": H200["c"].fact(c[FA3], FA3, "fit"),
            "fa2_c_ratio": H200["c_ratio"].fact(c[FA2] / c[FA3], FA2, FA3),
            "fa2_itl_ratio_short": H200["itl_ratio"].fact(shortest["ITL ratio"], FA2, FA3, int(shortest["n"])),
            "fa2_itl_ratio_long": H200["itl_ratio"].fact(longest["ITL ratio"], FA2, FA3, int(longest["n"])),
            "fa2_ready_s": H200["ready"].fact(ready[FA2], FA2, fmt=".0f"),
            "fa3_ready_s": H200["ready"].fact(ready[FA3], FA3, fmt=".0f")}


def floor_facts() -> dict:
    table, h200 = _table(), _h200_study()
    rows = report.against_floor(table, A10G_RUN).set_index(["arm", "n"])
    longest, out = int(_fit(table, A10G_RUN).loc[FLASH, "longest"]), {}
    for name, arm in (("fa", FLASH), ("flex", FLEX)):
        for what in ("ttft", "itl"):
            out[f"a10g_{name}_{what}_x_floor_long"] = A10G["x_floor"].fact(rows.loc[(arm, longest), f"{what}_x_floor"],
                                                                           arm, what, longest)
    h = report.against_floor(table, h200)
    fa3_x, flex_x = (h[h["arm"] == arm].set_index("n")["ttft_x_floor"] for arm in (FA3, FLEX))
    mid = 8192 if 8192 in fa3_x.index and 8192 in flex_x.index else int(flex_x.index[len(flex_x) // 2])
    x = lambda series, arm, n: H200["x_floor"].fact(series.loc[n], arm, "ttft", int(n))  # noqa: E731
    return out | {"h200_floor_mid": H200["length"].fact(mid, "middle of the floor table"),
                  "h200_fa3_x_mid": x(fa3_x, FA3, mid), "h200_fa3_x_long": x(fa3_x, FA3, fa3_x.index[-1]),
                  "h200_fa3_x_long_n": H200["length"].fact(int(fa3_x.index[-1]), f"longest {FA3}"),
                  "h200_flex_x_mid": x(flex_x, FLEX, mid), "h200_flex_x_long": x(flex_x, FLEX, flex_x.index[-1]),
                  "h200_flex_x_long_n": H200["length"].fact(int(flex_x.index[-1]), f"longest {FLEX}")}


def batch_facts() -> dict:
    src, table = "lab.results.concurrency", _concurrency()
    bandwidth, _ = rc.floor_bandwidth()
    contexts, concurrency = (2048, 32768), (1, 4, 16, 64)
    low, high, long = min(concurrency), max(concurrency), max(contexts)
    weights = rc.weight_bytes_per_step()
    out = {"batch_kv_bound_long": Fact(math.floor(rc.kv_bound_batch(long)) + 1, src),
           "batch_kv_bound_short": Fact(math.floor(rc.kv_bound_batch(min(contexts))) + 1, src),
           "batch_long": Fact(long, src), "batch_short": Fact(min(contexts), src),
           "batch_low": Fact(low, src), "batch_high": Fact(high, src), "batch_weights_gb": Fact(weights / 1e9, src)}
    at = lambda arm, b, key, q, fmt: q.fact(_get(rc.point(table, arm, long, b), key), arm, long, b, fmt=fmt)  # noqa: E731
    for b in (4, 16):  # either side of where the model puts the KV-bound batch at the long context
        out[f"batch_{b}_fa_itl"] = at(FA3, b, "itl_ms", rc.POINT_ITL, "{:.1f} ms")
        out[f"batch_{b}_fa_x_floor"] = at(FA3, b, "itl_x_floor", rc.POINT_X_FLOOR, "{:.2f}×")
    for b in (low, high):
        floor_s, kv = rc.floor_step_s(b, long, bandwidth), rc.kv_bytes_per_step(b, long)
        out |= {f"batch_{b}_floor_itl": rc.floor_fact(b, long), f"batch_{b}_floor_tok_s": Fact(b / floor_s, src),
                f"batch_{b}_kv_share": Fact(100 * kv / (kv + weights), src)}
        for name, arm in (("fa", FA3), ("flex", FLEX)):  # its floor is that of the batch vLLM admitted
            out[f"batch_{b}_{name}_itl"] = at(arm, b, "itl_ms", rc.POINT_ITL, "{:.1f} ms")
            out[f"batch_{b}_{name}_x_floor"] = at(arm, b, "itl_x_floor", rc.POINT_X_FLOOR, "{:.1f}×")
    # the FLEX arm was run only up to a few requests at the long context (a quarter of a second per step there)
    flex = table[(table["arm"] == FLEX) & (table["context"] == long)] if not table.empty else table
    top = int(flex["concurrency"].max()) if not flex.empty else None
    return out | {"batch_flex_top_n": rc.POINT_SENT.fact(top, FLEX, long, top, fmt="d"),
                  "batch_flex_top_itl": at(FLEX, top, "itl_ms", rc.POINT_ITL, "{:.1f} ms"),
                  "batch_flex_top_x_floor": at(FLEX, top, "itl_x_floor", rc.POINT_X_FLOOR, "{:.0f}×")}


def _get(row: dict | None, key: str):
    return row[key] if row else None


def tensor_parallel_facts() -> dict:
    shape, split = qwen25_7b(), variants.tensor_parallel(_table())
    src = "lab.results.modelshape"
    gpus = split.gpus if split else 2
    weights = 2 * (shape.layers * shape.linear_weights_per_layer + shape.lm_head_weights)
    bandwidth = ceiling("H200-SXM")
    out = {"tp_gpus": Fact(gpus, src), "tp_kv_heads_per_gpu": Fact(max(1, shape.kv_heads // gpus), src),
           "tp_q_heads_per_gpu": Fact(shape.q_heads // gpus, src),
           # o_proj and down_proj end in an all-reduce (RowParallelLinear), and so does the vocab-parallel
           # embedding (VocabParallelEmbedding.forward): 2 per layer + 1 per forward pass
           "tp_allreduces": Fact(2 * shape.layers + 1, "vllm 0.26: qwen2.py, linear.py, vocab_parallel_embedding.py"),
           "tp_allreduce_kb": Fact(shape.hidden * 2 / 1e3, src),
           "tp_weights_floor_one": WEIGHTS_FLOOR.fact(weights / bandwidth * 1e3, 1),
           "tp_weights_floor_split": WEIGHTS_FLOOR.fact(weights / gpus / bandwidth * 1e3, gpus)}
    last, first = (len(split.lengths) - 1, 0) if split else (None, None)
    get = lambda values, i: values[i] if split else None  # noqa: E731
    short = get(split.lengths, first) if split else None
    out |= {"tp_long_n": TP_LENGTH.fact(get(split.lengths, last) if split else None, "longest", fmt="{:,d}"),
            "tp_itl_short_n": TP_LENGTH.fact(short, "shortest", fmt="{:,d}"),
            "tp_ttft_ratio": TP_TTFT_RATIO.fact(split.ttft_one[last] / split.ttft_split[last] if split else None,
                                                split.lengths[last] if split else None, fmt="{:.2f}×"),
            "tp_itl_one": TP_ITL.fact(get(split.itl_one, first) if split else None, 1, short, fmt="{:.2f} ms"),
            "tp_itl_split": TP_ITL.fact(get(split.itl_split, first) if split else None, gpus, short, fmt="{:.2f} ms"),
            "tp_overhead_ms": TP_OVERHEAD.fact(split.itl_overhead_ms()[first] if split else None, short,
                                               fmt="{:.2f} ms"),
            "tp_gap_one": TP_GAP.fact(split.itl_one[first] - split.decode_floor_one_ms[first] if split else None, 1,
                                      short, fmt="{:.2f} ms"),
            "tp_gap_split": TP_GAP.fact(split.itl_split[first] - split.decode_floor_split_ms[first] if split else None,
                                        gpus, short, fmt="{:.2f} ms")}
    return out | _tensor_parallel_window(gpus)


def _tensor_parallel_window(gpus: int, tokens: int = 8192) -> dict:
    """One prefill window of the TP server beside the one-GPU window of the same prompt (census, ms)."""
    table = cw.census_table()
    split, one = (cw.window(table, g, "prefill", tokens, "FlashAttention") for g in (f"{gpus}x H200", "H200"))
    family = lambda w, q, fam: q.fact(w.ms.get(fam) if w.known else None, fam, fmt="{:.1f} ms")  # noqa: E731
    comm = split.ms.get("communication") if split.known else None
    window = next((w for w in cw.measured_windows() if w["gpu"] == f"{gpus}x H200" and w["window"] == f"prefill-{tokens}"),
                  None)
    return {"tp_window_n": Fact(tokens, "lab.book.pages.ch06._tensor_parallel_window"),
            "tp_window_ms": TP_WINDOW.fact(split.window_ms if split.known else None, "window", fmt="{:.0f} ms"),
            "one_window_ms": ONE_WINDOW.fact(one.window_ms if one.known else None, "window", fmt="{:.0f} ms"),
            "tp_comm_ms": family(split, TP_WINDOW, "communication"), "tp_attn_ms": family(split, TP_WINDOW, "attention"),
            "one_attn_ms": family(one, ONE_WINDOW, "attention"), "tp_matmul_ms": family(split, TP_WINDOW, "matmul"),
            "one_matmul_ms": family(one, ONE_WINDOW, "matmul"),
            "tp_comm_pct": TP_COMM_PCT.fact(100 * comm / split.window_ms if comm is not None else None, fmt="{:.0f}%"),
            "tp_comm_launches": TP_COMM_LAUNCHES.fact(window["launches"].get("communication") if window else None,
                                                      fmt="d")}


# --- facts: Nsight Compute on Flex's decode (lab.results.flex_counters) ----------------------------------------

COUNTER_KEYS = {"flex-default": "default", "flex-pad8": "pad8", "flex-pad8-mask": "pad8mask", "flex-paged": "paged",
                "sdpa-cudnn": "cudnn", "fa3": "fa3", "ours-tuned": "ours"}
#: Factor names of lab.results.flex_counters and their short glue names.
FACTORS = {"FA3 over the read floor": "fa3_floor", "useful work over the read floor": "useful",
           "rows computed per real row": "rows", "idle SMs": "idle_sms", "tensor pipe idle": "tensor_idle",
           "vLLM's recipe over the general kernel": "recipe", "instructions": "split_inst",
           "issue rate": "split_issue", "busy SMs": "split_busy", "clock": "split_clock"}
COUNTER_SRC = "data/h200/kernel-counters*/raw.csv (lab.results.flex_counters)"


def _text(value, fmt: str, source: str, suffix: str = "") -> Fact:
    """A counter value glued as text ("not measured yet" while its job is not on file)."""
    ok = value is not None and not (isinstance(value, float) and math.isnan(value))
    return Fact(f"{value:{fmt}}{suffix}" if ok else None, source)


def counter_facts(root: Path | None = None) -> dict:
    """Per decode job: time, programs, busy SMs, warps per SM, tensor pipe, top stall, DRAM read and its rate; the
    factor chain of vLLM's recipe over FA3 at batch 1 and 16; the decode template's programs."""
    rows, out = {(r["candidate"], r["batch"]): r for r in fc.table(root)}, {}
    for candidate, batch in fc.ROWS:
        row, key = rows.get((candidate, batch)), f"flexctr_{COUNTER_KEYS[candidate]}_b{batch}"
        src = row["source"] if row else COUNTER_SRC
        get = (lambda name, r=row: r[name]) if row else (lambda name: None)
        out |= {f"{key}_ms": _text(get("ms"), ".3f", src, " ms"), f"{key}_programs": _text(get("programs"), ",d", src),
                f"{key}_busy": _text(get("busy_sms"), ".0f", src), f"{key}_warps": _text(get("warps_per_sm"), ".0f", src),
                f"{key}_tensor": _text(get("tensor_pct"), ".1f", src, "%"),
                f"{key}_stall": Fact(get("top_stall").replace("_", " ") if row and get("top_stall") else None, src),
                f"{key}_read_gb": _text(get("dram_read_gb"), ".2f", src, " GB"),
                f"{key}_read_pct": _text(get("read_pct_of_ceiling"), ".1f", src, "%")}
    for batch in (1, 16):
        out |= _gap_facts(batch, root)
    jobs = fc.measured(root)
    for batch in (1, 16):
        job = jobs.get(("flex-pad8", batch))
        out[f"flexctr_pad8_b{batch}_per_program_gbs"] = _text(fc.per_program_read(job) / 1e9 if job else None, ".0f",
                                                              COUNTER_SRC, " GB/s")
    out["flexctr_ceiling_tbs"] = bandwidth_ceiling(fc.GPU, root).to("TB/s").shown_as("{:.2f} TB/s")
    return out


def _gap_facts(batch: int, root: Path | None = None) -> dict:
    """The factor chain of vLLM's FLEX recipe over FA3 at ``batch``."""
    gap, src = fc.gap(batch, root), "lab.results.flex_counters.gap over data/h200/kernel-counters*"
    value = (lambda name: gap.factor(name)) if gap else (lambda name: None)
    key = f"flexgap_b{batch}"
    out = {f"{key}_{short}": _text(value(name), ".2f" if short != "useful" else ".3f", src, "×")
           for name, short in FACTORS.items()}
    out[f"{key}_rows"] = _text(value("rows computed per real row"), ".0f", src, "×")
    out[f"{key}_fa3_over_floor"] = _text(1 / gap.factor("FA3 over the read floor") if gap else None, ".2f", src, "×")
    out[f"{key}_useful_inverse"] = _text(1 / gap.factor("useful work over the read floor") if gap else None, ".0f", src)
    for name, number, fmt in (("floor_us", gap.floor_ms * 1e3 if gap else None, ".1f"),
                              ("general_pred", gap.general_predicted if gap else None, ".1f"),
                              ("general_meas", gap.general_measured if gap else None, ".1f"),
                              ("product", gap.product if gap else None, ".1f"),
                              ("total", gap.total_measured if gap else None, ".1f"),
                              ("remainder_pct", 100 * (gap.remainder - 1) if gap else None, ".1f")):
        out[f"{key}_{name}"] = _text(number, fmt, src, " µs" if name == "floor_us" else "%" if name == "remainder_pct" else "×")
    return out


@functools.cache
def facts() -> dict[str, Fact]:
    """Every fact chapter 6 and its self-check state, by glue name."""
    return (setup_facts() | a10g_prefill_facts() | h200_prefill_facts() | decode_facts() | itl_resolution_facts()
            | flex_arm_facts() | flex_vs_cudnn_facts() | values_facts() | chunk_facts() | fa2_facts() | floor_facts()
            | batch_facts() | tensor_parallel_facts() | counter_facts())


# --- tables, figures and explorers --------------------------------------------------------------------------------

def rig_table():
    """What differs between the two rigs, one column per study."""
    table = _table()

    def column(study: str) -> dict:
        prov = report.provenance(table, study)
        real = prov["kind"] == "reference"
        values = lambda key: " or ".join(map(str, report.flag_values(table, study, key)))  # noqa: E731
        return {"GPU": report.study_label(table, study).rsplit(",", 1)[0], "vLLM": prov["vllm"], "data": study,
                "prefill chunk (max_num_batched_tokens)": values("max_num_batched_tokens"),
                "context limit (max_model_len)": values("max_model_len"),
                "weights": "real (Qwen2.5-7B-Instruct)" if real else "random, same shapes",
                "prompts": "filler text cut to length" if real else "random token ids, exact length",
                "arms": ", ".join(sorted(table.loc[table["study"] == study, "arm"].unique()))}

    return pd.DataFrame([column(s) for s in (A10G_RUN, _h200_study())]).set_index("GPU").T


def _studies() -> list[str]:
    return [A10G_RUN, _h200_study()]


def prefill_figure():
    return plot_prefill(_table(), _studies())


def decode_figure():
    return plot_decode(_table(), _studies())


def fit_table():
    """Each arm's fit with its 95% intervals and the quadratic term's share at 8k and 32k, both rigs."""
    def one(study: str):
        fits = report.fit_summary(_table(), study)
        shown_fits = pd.DataFrame({
            "backend": fits["arm"], "a (s)": fits["a_s"].map(lambda v: f"{v:.3f}"),
            "b (µs/token), 95% CI": [f"{b:.1f} [{lo:.1f}, {hi:.1f}]" for b, lo, hi in zip(fits["b_us_per_token"], fits["b_lo"], fits["b_hi"], strict=True)],
            "c (ps/token²), 95% CI": [f"{c:.0f} [{lo:.0f}, {hi:.0f}]" for c, lo, hi in zip(fits["c_ps_per_token2"], fits["c_lo"], fits["c_hi"], strict=True)],
            "quad share @ 8k": fits["share_8192_pct"].map(lambda v: f"{v:.1f}%"),
            "quad share @ 32k": fits["share_32768_pct"].map(lambda v: f"{v:.1f}%"), "points": fits["points"]})
        shown_fits.insert(0, "GPU", report.study_label(_table(), study))
        return shown_fits

    return pd.concat([one(s) for s in _studies()]).style.hide(axis="index")


def decomposition_tables() -> list:
    """The Flex ladder per phase and batch: each step's time, rate, share of the read ceiling and factor."""
    dec, out = _decomposition(), []
    if dec is None:
        return out
    for phase in ("decode", "prefill"):
        for batch in dec.batches(phase):
            steps = flexdec.ladder(dec, phase, batch)
            steps.insert(0, "shape", f"{phase}, batch {batch}, n = {dec.length(phase):,}")
            out.append(steps.rename(columns={"rate": "GB/s of K/V" if phase == "decode" else "TFLOP/s",
                                             "pct_of_ceiling": "% of read ceiling", "x_step": "time ×", "over": "over"})
                       .style.format(precision=2, na_rep="").format("{:,.0f}", subset=["programs"], na_rep="")
                       .hide(axis="index"))
    return out


def counter_table():
    """Nsight Compute on each decode variant, FA3, cuDNN and our tuned kernel (None while not on file)."""
    counters = pd.DataFrame(fc.table())
    if counters.empty:
        return None
    return (counters.drop(columns="source").rename(columns={
        "candidate": "kernel", "ms": "ms (all its kernels)", "busy_sms": "busy SMs", "warps_per_sm": "warps/SM",
        "tensor_pct": "tensor pipe %", "top_stall": "top stall", "dram_read_gb": "DRAM read (GB)",
        "read_pct_of_ceiling": "DRAM read rate, % of ceiling"})
        .style.format(precision=2).format("{:.0f}", subset=["busy SMs", "warps/SM"])
        .format("{:.1f}", subset=["tensor pipe %", "DRAM read rate, % of ceiling"]).hide(axis="index"))


def fa2_table():
    return (report.compare_arms(_table(), _h200_study(), FA2, FA3).style.hide(axis="index").format(precision=3))


def floor_table():
    """Each arm's shortest, middle and longest point against its roofline floor, both rigs."""
    def one(study: str):
        rows = report.against_floor(_table(), study)
        keep = rows.groupby("arm")["n"].transform(lambda n: n.isin([n.min(), n.iloc[len(n) // 2], n.max()]))
        chosen = rows[keep].copy()
        chosen.insert(0, "GPU", report.study_label(_table(), study))
        return chosen

    return (pd.concat([one(s) for s in _studies()]).rename(columns={
        "arm": "backend", "n": "tokens", "ttft_s": "TTFT (s)", "prefill_floor_s": "prefill floor (s)",
        "ttft_x_floor": "TTFT / floor", "itl_ms": "ITL (ms)", "decode_floor_ms": "decode floor (ms)",
        "itl_x_floor": "ITL / floor"}).style.hide(axis="index").format(precision=3))


def tensor_parallel_figure():
    split = variants.tensor_parallel(_table())
    return plot_tensor_parallel(split) if split is not None else None


def concurrency_explorer():
    return _concurrency_explorer()


def sweep_explorer():
    return _sweep_explorer()

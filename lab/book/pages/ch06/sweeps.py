"""Chapter 6's facts of the sweeps: the rigs, the prefill fits, decode, the ITL medians' resolution, the value
study, chunking, FA2 against FA3, the roofline floors, batching and two GPUs."""

from __future__ import annotations

import math
from pathlib import Path

from lab.book.facts import Fact
from lab.book.pages.ch06.quantities import (
    A10G,
    A10G_RUN,
    B_AT_MATMUL_RATE,
    CHUNK_ADDED,
    CHUNK_FIT,
    CHUNK_RATIO,
    CHUNK_REREAD,
    CHUNK_REREAD_SHARE,
    CHUNK_SIZE,
    FA2,
    FA3,
    FLASH,
    FLEX,
    H200,
    H200_CEILINGS,
    ITL_CHECKS,
    ITL_RES,
    KV_BOUND,
    ONE_WINDOW,
    SHAPE,
    SPECS,
    TP_COMM_LAUNCHES,
    TP_COMM_PCT,
    TP_GAP,
    TP_ITL,
    TP_LENGTH,
    TP_OVERHEAD,
    TP_TTFT_RATIO,
    TP_WINDOW,
    VALUES_PCT,
    WEIGHTS_FLOOR,
    concurrency_points,
    fit,
    h200_study,
    kv_bound_batch,
    sweep_table,
)
from lab.results import census_windows as cw
from lab.results import concurrency as rc
from lab.results import iomodel, probe_timing, reference, roofline, value_dependence
from lab.results import sweep_variants as variants
from lab.results import sweeps as report
from lab.results.bandwidth import bandwidth_ceiling, ceiling, datasheet_bandwidth
from lab.results.data import DATA_DIR
from lab.results.hardware import device, load_measurement
from lab.results.modelshape import kv_per_token, qwen25_7b, streamed_weights_gb, weights_gb

# --- facts: setup and the A10G prefill -----------------------------------------------------------------------

def setup_facts() -> dict:
    table, h200 = sweep_table(), h200_study()
    shape, flags, h200_flags = qwen25_7b(), report.provenance(table, A10G_RUN)["flags"], report.provenance(table, h200)["flags"]
    setting = lambda q, key, value, fmt="": q["setting"].fact(value, key, fmt=fmt)  # noqa: E731
    return {"layers": Fact(shape.layers, SHAPE), "q_heads": Fact(shape.q_heads, SHAPE),
            "kv_heads": Fact(shape.kv_heads, SHAPE), "head_dim": Fact(shape.head_dim, SHAPE),
            "kv_bytes_per_token": kv_per_token(), "weights_gb": weights_gb(),
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
    table = sweep_table()
    fits, floor, gpu = fit(table, A10G_RUN), report.floors(report.provenance(table, A10G_RUN)["gpu"], [1000]), device("A10G")
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
    table, h200 = sweep_table(), h200_study()
    fits, floor = fit(table, h200), report.floors(report.provenance(table, h200)["gpu"], [1000])
    fa, flex = fits.loc[FA3], fits.loc[FLEX]
    fa_rows, flex_rows = report.arm_rows(table, h200, FA3), report.arm_rows(table, h200, FLEX).set_index("target_len")
    common = int(max(set(flex_rows.index) & set(fa_rows["target_len"])))
    longest = int(fa_rows["actual_len"].max())
    shared_fit = report.prefill_fit(table, h200, FA3)
    own = report.prefill_fit(table, h200, FA3, lengths=set(fa_rows["target_len"].astype(int)))   # FA3 to its longest
    predicted, measured = float(shared_fit.predict(longest)), float(fa_rows["ttft_s"].iloc[-1])
    own_vs = ("below" if own.c_ci[1] < shared_fit.c_ci[0] else "above" if own.c_ci[0] > shared_fit.c_ci[1]
              else "inside") + " the interval of the fit over the shared lengths"
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
        "h200_fa_pred_longest": H200["ttft_fit"].fact(predicted, FA3, longest),
        "h200_fa_pred_over_pct": H200["fit_error"].fact(100 * (predicted / measured - 1), FA3, longest),
        "h200_fa_c_own": H200["c"].fact(own.c_ps_per_token2, FA3, "own lengths"),
        "h200_fa_c_own_lo": H200["c"].fact(own.c_ci[0] * 1e12, FA3, "own lengths", "lo"),
        "h200_fa_c_own_hi": H200["c"].fact(own.c_ci[1] * 1e12, FA3, "own lengths", "hi"),
        "h200_fa_c_own_vs": Fact(own_vs, H200["c"].source),
        "h200_corr_bc": Fact(trade.corr_bc, "lab.results.sweep_variants.coefficient_correlation"),
        "h200_matmul_rate_tflops": roofline.matmul_rate().to("TFLOP/s"),
        "h200_b_at_matmul_rate": B_AT_MATMUL_RATE.fact(b_held * 1e6),
        "h200_flex_c_at_matmul_rate": Fact(trade.c_at_b * 1e12, "lab.results.sweep_variants.refit_with_b"),
        "h200_flex_c_shift_pct": Fact(trade.c_shift_pct, "lab.results.sweep_variants.refit_with_b")}


def _target_len(table, study: str, arm: str, actual_len) -> int:
    """The target length of the sweep row that ran ``actual_len`` tokens."""
    rows = report.arm_rows(table, study, arm)
    return int(rows.loc[rows["actual_len"] == actual_len, "target_len"].iloc[0])


#: The A10G point chapter 6 quotes at short context: the study's prompt that aimed at 2,048 tokens.
TWO_K_TARGET = 2048


def decode_facts() -> dict:
    table, h200 = sweep_table(), h200_study()
    shape, a10g_gpu, h200_gpu = qwen25_7b(), device("A10G"), device("H200-SXM")
    out = {}
    for gpu, study, q, named in (("a10g", A10G_RUN, A10G, (("fa", FLASH), ("flex", FLEX))),
                                 ("h200", h200, H200, (("fa", FA3), ("flex", FLEX)))):
        fits = fit(table, study)
        nominal = lambda arm, column, s=study, f=fits: _target_len(table, s, arm, f.loc[arm, column])  # noqa: E731
        for name, arm in named:
            row = fits.loc[arm]
            # each point is keyed by the tokens its prompt had (the A10G's prompts ran a token past their targets)
            short, long = int(row["short_len"]), int(row["long_len"])
            out |= {f"{gpu}_{name}_itl_short": q["itl"].fact(row["itl_short_ms"], arm, short),
                    f"{gpu}_{name}_itl_long": q["itl"].fact(row["itl_long_ms"], arm, long),
                    f"{gpu}_{name}_itl_growth": q["itl_growth"].fact(row["itl_growth_pct"], arm),
                    f"{gpu}_{name}_kv_rate": report.kv_read_fact(table, study, arm),
                    f"{gpu}_{name}_kv_pct": report.kv_read_pct_fact(table, study, arm)}
        out[f"{gpu}_short_len"] = q["length"].fact(nominal(fits.index[0], "short_len"), "shortest")
        out[f"{gpu}_fa_long_len"] = q["length"].fact(nominal(named[0][1], "long_len"), f"longest {named[0][1]}")
        out[f"{gpu}_flex_long_len"] = q["length"].fact(nominal(FLEX, "long_len"), f"longest {FLEX}")
    # the A10G's prompts as the tokens they had (the intro and chapter 1 state the same facts under the same names):
    # the study asked for round lengths and its prompts came out a token or two longer; the longest ran its target
    a10g_rows = {arm: report.arm_rows(table, A10G_RUN, arm).set_index("target_len") for arm in (FLASH, FLEX)}
    short_target = out["a10g_short_len"].value
    two_k = int(a10g_rows[FLASH].loc[TWO_K_TARGET, "actual_len"])
    out |= {"a10g_short_target": out["a10g_short_len"],
            "a10g_short_len": reference.PROMPT_TOKENS.fact(int(a10g_rows[FLASH].loc[short_target, "actual_len"]),
                                                           "short"),
            "a10g_two_k_len": reference.PROMPT_TOKENS.fact(two_k, "2k")}
    long_len = out["a10g_fa_long_len"].value
    out |= {"a10g_fa_itl_2k": A10G["itl"].fact(a10g_rows[FLASH].loc[TWO_K_TARGET, "itl_ms"], FLASH, two_k),
            "a10g_flex_itl_2k": A10G["itl"].fact(a10g_rows[FLEX].loc[TWO_K_TARGET, "itl_ms"], FLEX, two_k),
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
    table, h200, out = sweep_table(), h200_study(), {}
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


# --- facts: the value study, chunking, FA2, floors, batching, two GPUs ---------------------------------------------

def values_facts(root: Path = DATA_DIR) -> dict:
    data = value_dependence.read(root)
    out = {"values_status": Fact(f"measured, {data.source}" if data else None, VALUES_PCT.source)}
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
    comparison = variants.chunk_comparison(sweep_table())
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
    table, h200 = sweep_table(), h200_study()
    versus, fits = report.compare_arms(table, h200, FA2, FA3), fit(table, h200)
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
    table, h200 = sweep_table(), h200_study()
    rows = report.against_floor(table, A10G_RUN).set_index(["arm", "n"])
    longest, out = int(fit(table, A10G_RUN).loc[FLASH, "longest"]), {}
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
    src, table = "lab.results.concurrency", concurrency_points()
    bandwidth, _ = rc.floor_bandwidth()
    contexts, concurrency = (2048, 32768), (1, 4, 16, 64)
    low, high, long = min(concurrency), max(concurrency), max(contexts)
    weights = rc.weight_bytes_per_step()
    out = {"batch_kv_bound_long": KV_BOUND.fact(kv_bound_batch(long), long, fmt="d"),
           "batch_kv_bound_short": KV_BOUND.fact(kv_bound_batch(min(contexts)), min(contexts), fmt="d"),
           "batch_long": Fact(long, src), "batch_short": Fact(min(contexts), src),
           "batch_low": Fact(low, src), "batch_high": Fact(high, src),
           # chapter 1's streamed weights, the same bytes the floors above count
           "weights_streamed_gb": streamed_weights_gb()}
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
    # the KV cache holds fewer than the most requests sent: how many vLLM ran at once
    out[f"batch_{high}_fa_admitted"] = at(FA3, high, "admitted", rc.POINT_ADMITTED, "d")
    # the FLEX arm was run only up to a few requests at the long context (a quarter of a second per step there)
    flex = table[(table["arm"] == FLEX) & (table["context"] == long)] if not table.empty else table
    top = int(flex["concurrency"].max()) if not flex.empty else None
    return out | {"batch_flex_top_n": rc.POINT_SENT.fact(top, FLEX, long, top, fmt="d"),
                  "batch_flex_top_itl": at(FLEX, top, "itl_ms", rc.POINT_ITL, "{:.1f} ms"),
                  "batch_flex_top_x_floor": at(FLEX, top, "itl_x_floor", rc.POINT_X_FLOOR, "{:.0f}×")}


def _get(row: dict | None, key: str):
    return row[key] if row else None


def tensor_parallel_facts() -> dict:
    shape, split = qwen25_7b(), variants.tensor_parallel(sweep_table())
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
    hidden_bytes = qwen25_7b().hidden * 2   # one bf16 hidden vector: what an all-reduce carries per token
    return {"tp_window_n": Fact(tokens, "lab.book.pages.ch06._tensor_parallel_window"),
            "tp_prefill_allreduce_mb": Fact(tokens * hidden_bytes / 1e6, "lab.results.modelshape: hidden x 2 bytes "
                                            "x the window's tokens"),
            "tp_window_ms": TP_WINDOW.fact(split.window_ms if split.known else None, "window", fmt="{:.0f} ms"),
            "one_window_ms": ONE_WINDOW.fact(one.window_ms if one.known else None, "window", fmt="{:.0f} ms"),
            "tp_comm_ms": family(split, TP_WINDOW, "communication"), "tp_attn_ms": family(split, TP_WINDOW, "attention"),
            "one_attn_ms": family(one, ONE_WINDOW, "attention"), "tp_matmul_ms": family(split, TP_WINDOW, "matmul"),
            "one_matmul_ms": family(one, ONE_WINDOW, "matmul"),
            "tp_comm_pct": TP_COMM_PCT.fact(100 * comm / split.window_ms if comm is not None else None, fmt="{:.0f}%"),
            "tp_comm_launches": TP_COMM_LAUNCHES.fact(window["launches"].get("communication") if window else None,
                                                      fmt="d")}

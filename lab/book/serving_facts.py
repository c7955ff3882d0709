"""Chapter 6's facts: every number its prose glues, gathered from lab.results in one place.

Values measured in the committed sweeps are plain numbers (the markdown formats them); values from
runs that may not be on file yet (the Flex decomposition, values vs shapes, the chunk-size and
tensor-parallel sweeps, the concurrency sweep) are pre-formatted text that reads "not measured yet"
while their data is absent, so the same sentence serves both states.
"""

from __future__ import annotations

import math

from lab.book.facts import Fact, shown  # noqa: F401  (shown: what this chapter's facts are glued by)
from lab.book.flex_counter_facts import flex_counters
from lab.measure.vllm import arms
from lab.results import concurrency as rc
from lab.results import flex_decomposition as flexdec
from lab.results import iomodel
from lab.results import sweep_variants as variants
from lab.results import sweeps as report
from lab.results import value_dependence
from lab.results.bandwidth import bandwidth_ceiling, ceiling, datasheet_bandwidth
from lab.results.hardware import device, load_measurement
from lab.results.modelshape import kv_per_token, qwen25_7b

H200_CEILINGS = "data/h200/hardware"  # the H200's matmul ceiling (its bandwidth ceiling: lab.results.bandwidth)
FA3, FLEX, FA2 = arms.FA3.label, arms.FLEX.label, arms.FA2.label
FLASH = arms.FLASH.label  # the A10G study's FLASH_ATTN, version left to vLLM



def rig(table, study: str) -> dict:
    """One column of the rig table: what differs between the studies."""
    prov = report.provenance(table, study)
    real = prov["kind"] == "reference"
    return {"GPU": report.study_label(table, study).rsplit(",", 1)[0], "vLLM": prov["vllm"], "data": study,
            "prefill chunk (max_num_batched_tokens)": " or ".join(map(str, report.flag_values(table, study, "max_num_batched_tokens"))),
            "context limit (max_model_len)": " or ".join(map(str, report.flag_values(table, study, "max_model_len"))),
            "weights": "real (Qwen2.5-7B-Instruct)" if real else "random, same shapes",
            "prompts": "filler text cut to length" if real else "random token ids, exact length",
            "arms": ", ".join(sorted(table.loc[table["study"] == study, "arm"].unique()))}


def setup(table, a10g: str, h200: str) -> dict:
    shape, src = qwen25_7b(), "lab.results.modelshape: Qwen2.5-7B config.json"
    flags, h200_flags = report.provenance(table, a10g)["flags"], report.provenance(table, h200)["flags"]
    sweep_src = f"data/{h200}/*/provenance.json"
    return {"layers": Fact(shape.layers, src), "q_heads": Fact(shape.q_heads, src), "kv_heads": Fact(shape.kv_heads, src),
            "head_dim": Fact(shape.head_dim, src), "kv_bytes_per_token": kv_per_token(),
            "weights_gb": Fact(shape.parameters * 2 / 1e9, src),
            "a10g_chunk": Fact(report.chunk_size(table, a10g), f"data/{a10g}/provenance.json"),
            "a10g_max_model_len": Fact(flags["max_model_len"], f"data/{a10g}/provenance.json"),
            "gen_tokens": Fact(flags["gen_tokens"], f"data/{a10g}/provenance.json"),
            "reps": Fact(h200_flags["reps"], sweep_src), "long_reps": Fact(h200_flags["long_reps"], sweep_src),
            "long_from": Fact(h200_flags["long_from"], sweep_src),
            "h200_chunk": Fact(report.chunk_size(table, h200), sweep_src)}


def a10g_prefill(table, a10g: str) -> dict:
    fits, src = report.fit_summary(table, a10g).set_index("arm"), f"data/{a10g}/sweep.csv"
    floor, gpu = report.floors(report.provenance(table, a10g)["gpu"], [1000]), device("A10G")
    rows = {arm: report.arm_rows(table, a10g, arm).set_index("target_len") for arm in (FLASH, FLEX)}
    out = {}
    for name, arm in (("fa", FLASH), ("flex", FLEX)):
        row = fits.loc[arm]
        for key, column in (("b", "b_us_per_token"), ("b_lo", "b_lo"), ("b_hi", "b_hi"), ("c", "c_ps_per_token2"),
                            ("c_lo", "c_lo"), ("c_hi", "c_hi"), ("share_2k", "share_2048_pct"),
                            ("share_32k", "share_32768_pct")):
            out[f"a10g_{name}_{key}"] = Fact(row[column], src)
        out[f"a10g_{name}_matmul_eff"] = Fact(floor["b_floor"] * 1e6 / row["b_us_per_token"] * 100, src)
        out[f"a10g_{name}_attn_eff"] = Fact(floor["c_floor"] * 1e12 / row["c_ps_per_token2"] * 100, src)
    fa, flex = rows[FLASH]["ttft_s"], rows[FLEX]["ttft_s"]
    out |= {"a10g_c_ratio": Fact(fits.loc[FLEX, "c_ps_per_token2"] / fits.loc[FLASH, "c_ps_per_token2"], src),
            "a10g_b_floor": Fact(floor["b_floor"] * 1e6, "lab.results.sweeps.floors"),
            "a10g_c_floor": Fact(floor["c_floor"] * 1e12, "lab.results.sweeps.floors"),
            "a10g_peak_tflops": Fact(gpu.bf16_flops / 1e12, "lab.results.hardware"),
            "a10g_longest": Fact(int(fits.loc[FLASH, "longest"]), src),
            "a10g_ttft_2k_fa": Fact(fa.loc[2048], src), "a10g_ttft_2k_flex": Fact(flex.loc[2048], src),
            "a10g_ttft_2k_gap": Fact((flex.loc[2048] / fa.loc[2048] - 1) * 100, src),
            "a10g_ttft_long_fa": Fact(fa.iloc[-1], src), "a10g_ttft_long_flex": Fact(flex.iloc[-1], src),
            "a10g_ttft_long_ratio": Fact(flex.iloc[-1] / fa.iloc[-1], src)}
    return out


def h200_prefill(table, h200: str) -> dict:
    fits, src = report.fit_summary(table, h200).set_index("arm"), f"data/{h200}/*/sweep.csv"
    floor = report.floors(report.provenance(table, h200)["gpu"], [1000])
    fa, flex = fits.loc[FA3], fits.loc[FLEX]
    fa_rows, flex_rows = report.arm_rows(table, h200, FA3), report.arm_rows(table, h200, FLEX).set_index("target_len")
    common = max(set(flex_rows.index) & set(fa_rows["target_len"]))
    longest = int(fa_rows["actual_len"].max())
    c_per_b = fa["c_ps_per_token2"] * 1e-12 * longest / (fa["b_us_per_token"] * 1e-6)
    overlap = fits.loc[[FA3, FLEX], "b_lo"].max() <= fits.loc[[FA3, FLEX], "b_hi"].min()
    ceilings = load_measurement(H200_CEILINGS)
    b_held = qwen25_7b().linear_flops_per_token() / ceilings.peak_flops
    trade = variants.tradeoff(table, h200, FLEX, b_held)
    return {"h200_fa_a_ms": Fact(1e3 * fa["a_s"], src), "h200_flex_a_ms": Fact(1e3 * flex["a_s"], src),
            "h200_fa_b": Fact(fa["b_us_per_token"], src), "h200_flex_b": Fact(flex["b_us_per_token"], src),
            "h200_flex_b_lo": Fact(flex["b_lo"], src), "h200_flex_b_hi": Fact(flex["b_hi"], src),
            "h200_fa_b_lo": Fact(fa["b_lo"], src), "h200_fa_b_hi": Fact(fa["b_hi"], src),
            "h200_fa_b_eff": Fact(floor["b_floor"] * 1e6 / fa["b_us_per_token"] * 100, src),
            "h200_flex_b_eff": Fact(floor["b_floor"] * 1e6 / flex["b_us_per_token"] * 100, src),
            "h200_peak_tflops": Fact(device("H200-SXM").bf16_flops / 1e12, "lab.results.hardware"),
            "h200_b_intervals": Fact("overlap" if overlap else "do not overlap", src),
            "h200_fa_c": Fact(fa["c_ps_per_token2"], src), "h200_flex_c": Fact(flex["c_ps_per_token2"], src),
            "h200_c_ratio": Fact(flex["c_ps_per_token2"] / fa["c_ps_per_token2"], src),
            "h200_common_len": Fact(int(common), src),
            "h200_ttft_common_flex": Fact(flex_rows.loc[common, "ttft_s"], src),
            "h200_ttft_common_fa": Fact(fa_rows.set_index("target_len").loc[common, "ttft_s"], src),
            "h200_fa3_longest": Fact(longest, src), "h200_fa3_ttft_longest": Fact(fa_rows["ttft_s"].iloc[-1], src),
            "h200_fa_share_32k": Fact(fa["share_32768_pct"], src),
            "h200_fa_share_longest": Fact(100 * c_per_b / (1 + c_per_b), src),
            "h200_corr_bc": Fact(trade.corr_bc, "lab.results.sweep_variants.coefficient_correlation"),
            "h200_matmul_ceiling_tflops": Fact(ceilings.peak_flops / 1e12, f"{H200_CEILINGS}/measurements.json"),
            "h200_b_at_ceiling": Fact(b_held * 1e6, f"{H200_CEILINGS}/measurements.json"),
            "h200_flex_c_at_ceiling": Fact(trade.c_at_b * 1e12, "lab.results.sweep_variants.refit_with_b"),
            "h200_flex_c_shift_pct": Fact(trade.c_shift_pct, "lab.results.sweep_variants.refit_with_b")}


def decode(table, a10g: str, h200: str) -> dict:
    shape, a10g_gpu, h200_gpu = qwen25_7b(), device("A10G"), device("H200-SXM")
    out = {}
    for gpu, study, named in (("a10g", a10g, (("fa", FLASH), ("flex", FLEX))), ("h200", h200, (("fa", FA3), ("flex", FLEX)))):
        fits, src = report.fit_summary(table, study).set_index("arm"), f"data/{study}/sweep.csv"
        for name, arm in named:
            row = fits.loc[arm]
            out |= {f"{gpu}_{name}_itl_short": Fact(row["itl_short_ms"], src),
                    f"{gpu}_{name}_itl_long": Fact(row["itl_long_ms"], src),
                    f"{gpu}_{name}_itl_growth": Fact(row["itl_growth_pct"], src),
                    f"{gpu}_{name}_kv_rate": report.kv_read_fact(table, study, arm)}
        # the lengths as the study names them (its target lengths; the A10G's prompts ran a token longer)
        nominal = lambda arm, column: Fact(_target_len(table, study, arm, fits.loc[arm, column]), src)  # noqa: E731
        out[f"{gpu}_short_len"] = nominal(fits.index[0], "short_len")
        out[f"{gpu}_fa_long_len"] = nominal(named[0][1], "long_len")
        out[f"{gpu}_flex_long_len"] = nominal(FLEX, "long_len")
    a10g_rows = {arm: report.arm_rows(table, a10g, arm).set_index("target_len") for arm in (FLASH, FLEX)}
    long_len = out["a10g_fa_long_len"].value
    out |= {"a10g_fa_itl_2k": Fact(a10g_rows[FLASH].loc[2048, "itl_ms"], f"data/{a10g}/sweep.csv"),
            "a10g_flex_itl_2k": Fact(a10g_rows[FLEX].loc[2048, "itl_ms"], f"data/{a10g}/sweep.csv"),
            "a10g_bandwidth": bandwidth_ceiling(a10g_gpu).to("GB/s"),
            "h200_bandwidth_tb": datasheet_bandwidth(h200_gpu).to("TB/s"),
            "h200_ceiling_gbs": bandwidth_ceiling(h200_gpu).to("GB/s"),
            "h200_fa_kv_pct": report.kv_read_pct_fact(table, h200, FA3),
            "a10g_decode_floor_short": rc.floor_fact(1, out["a10g_short_len"].value, "A10G"),
            "a10g_decode_floor_long": rc.floor_fact(1, long_len, "A10G"),
            "a10g_kv_long_gb": Fact(long_len * shape.kv_bytes_per_token() / 1e9, "lab.results.modelshape"),
            "a10g_kv_rate_ratio": Fact(out["a10g_fa_kv_rate"].value / out["a10g_flex_kv_rate"].value, "lab.results.sweeps.kv_read_rate"),
            "a10g_kv_pct": report.kv_read_pct_fact(table, a10g, FLASH),
            "a10g_sms": Fact(a10g_gpu.sm_count, "lab.results.hardware"), "h200_sms": Fact(h200_gpu.sm_count, "lab.results.hardware"),
            "group": Fact(shape.q_heads // shape.kv_heads, "lab.results.modelshape")}
    for gpu_name, gpu in (("a10g", a10g_gpu), ("h200", h200_gpu)):
        out[f"{gpu_name}_min_splits_groups"] = Fact(math.ceil(gpu.sm_count / shape.kv_heads), "lab.results.hardware")
    return out


def _target_len(table, study: str, arm: str, actual_len) -> int:
    """The target length of the sweep row that ran ``actual_len`` tokens."""
    rows = report.arm_rows(table, study, arm)
    return int(rows.loc[rows["actual_len"] == actual_len, "target_len"].iloc[0])


FLEX_VARIANTS = ("flex-default", "flex-forced", "flex-tiles16", "flex-paged", "flex-pad8", "sdpa-flash", "sdpa-cudnn")


def flex_arm(table, h200: str) -> dict:
    """vLLM's FLEX arm from our traces, and the standalone decomposition when it is on file."""
    read_ceiling, read_source = ceiling("H200-SXM"), bandwidth_ceiling("H200-SXM").source
    vllm, fa3 = flexdec.vllm_flex(), flexdec.vllm_flex(backend="FlashAttention", arm=FA3)
    dec = flexdec.read()
    src = dec.source if dec else f"data/{flexdec.DATASET}/{flexdec.FILE}"
    out = {"vllm_flex_tokens": Fact(vllm.tokens, vllm.source),
           "vllm_flex_decode_gbs": shown(vllm.decode_gb_per_s, ".0f", vllm.source),
           "vllm_flex_decode_pct": shown(100 * vllm.decode_gb_per_s * 1e9 / read_ceiling if vllm.decode_gb_per_s
                                         else None, ".1f", f"{vllm.source} over {read_source}", "%"),
           "vllm_flex_prefill_tflops": shown(vllm.prefill_tflops, ".0f", vllm.source),
           "vllm_fa3_prefill_tflops": shown(fa3.prefill_tflops, ".0f", f"data/h200/vllm0.26-qwen2.5-7b/traces/{arms.FA3.slug}"),
           "flexdec_status": Fact(f"measured on the {dec.gpu} ({src})" if dec else None, src),
           "flexdec_decode_n": shown(dec.length("decode") if dec else None, ",d", src),
           "flexdec_prefill_n": shown(dec.length("prefill") if dec else None, ",d", src),
           "flexdec_pow2_checked": Fact({True: "does", False: "does not"}.get(dec.torch_checks_power_of_two() if dec else None),
                                        f"{src[:-len(flexdec.FILE)]}provenance.json: flags.sources"),
           "flexdec_vllm_vs_paged_x": shown(flexdec.vllm_over(dec, vllm), ".2f", src, "×")}
    for batch in (1, 16):
        out |= _flex_decode(dec, batch, src, read_ceiling / 1e9)
    out |= _flex_prefill(dec, src) | _vllm_flex_kernels(table, h200) | _flex_concurrency()
    return out


def _flex_decode(dec, batch: int, src: str, ceiling_gbs: float) -> dict:
    """One decode batch of the decomposition: rates (and their share of the read ceiling), times, programs, and
    each step's factor."""
    value = (lambda fn, *a: fn("decode", batch, *a)) if dec else (lambda fn, *a: None)
    out = {}
    for variant in FLEX_VARIANTS:
        key, rate = f"flexdec_b{batch}_{variant.replace('-', '_')}", value(dec.rate, variant) if dec else None
        out[f"{key}_gbs"] = shown(rate, ",.0f", src, " GB/s")
        out[f"{key}_pct"] = shown(100 * rate / ceiling_gbs if rate else None, ".1f",
                                  f"{src} over {bandwidth_ceiling('H200-SXM').source}", "%")
        out[f"{key}_ms"] = shown(value(dec.ms, variant) if dec else None, ".3f", src, " ms")
        out[f"{key}_programs"] = shown(value(dec.programs, variant) if dec else None, ",d", src)
    for slow, fast, _ in (*flexdec.STEPS, flexdec.DECODE_TEMPLATE):
        out[f"flexdec_b{batch}_{slow.split('-')[1]}_x"] = _factor(dec, "decode", batch, slow, fast, src, ".2f")
    for fast in ("flex-pad8", "sdpa-cudnn"):  # how many times faster than the general kernel
        out[f"flexdec_b{batch}_default_over_{fast.split('-')[1]}"] = _factor(dec, "decode", batch, "flex-default",
                                                                             fast, src, ".1f")
    out[f"flexdec_b{batch}_pad8_combine"] = shown(value(dec.extra_kernels, "flex-pad8") if dec else None, "d", src)
    return out


def _flex_prefill(dec, src: str) -> dict:
    batch = (dec.batches("prefill") or [1])[0] if dec else 1  # the prefill rows' batch, whatever it is
    out = {}
    for variant in FLEX_VARIANTS:
        key = f"flexdec_prefill_{variant.replace('-', '_')}"
        out[f"{key}_tflops"] = shown(dec.rate("prefill", batch, variant) if dec else None, ".0f", src, " TFLOP/s")
        out[f"{key}_ms"] = shown(dec.ms("prefill", batch, variant) if dec else None, ",.1f", src, " ms")
        out[f"{key}_programs"] = shown(dec.programs("prefill", batch, variant) if dec else None, ",d", src)
        grid = dec.grid("prefill", batch, variant) if dec else None  # (query tiles, batch, heads)
        out[f"{key}_rows"] = shown(dec.length("prefill") / grid[0] if grid else None, ".0f", src)
    for slow, fast, _ in flexdec.STEPS:
        out[f"flexdec_prefill_{slow.split('-')[1]}_x"] = _factor(dec, "prefill", batch, slow, fast, src,
                                                                 ".2f" if slow == "flex-forced" else ".1f")
    return out


def _factor(dec, phase: str, batch: int, slow: str, fast: str, src: str, fmt: str) -> Fact:
    """One time ratio of the decomposition, glued as "2.1×" (not measured while the decomposition is not)."""
    return (dec.factor_fact(phase, batch, slow, fast) if dec else Fact(None, src)).shown_as("{:" + fmt + "}×")


def _vllm_flex_kernels(table, h200: str) -> dict:
    """vLLM's own Flex kernel in the 28k windows: its grid, and the query rows per program it implies."""
    tokens = flexdec.VLLM_WINDOW_TOKENS
    decode, prefill = flexdec.vllm_kernels(f"decode-{tokens}"), flexdec.vllm_kernels(f"prefill-{tokens}")
    src = f"data/{flexdec.VLLM_TRACES}/*-{tokens}.trace.json.gz"
    main = decode[0] if decode else None
    chunk = prefill[0] if prefill else None  # most calls: the full chunks
    rows = report.chunk_size(table, h200) / chunk.grid[0] if chunk else None
    return {"vllm_flex_decode_grid": Fact(list(main.grid) if main else None, src),
            "vllm_flex_decode_programs": shown(main.programs if main else None, "d", src),
            "vllm_flex_decode_kernel_ms": shown(main.ms_per_call if main else None, ".2f", src, " ms"),
            "vllm_flex_prefill_grid": Fact(list(chunk.grid) if chunk else None, src),
            "vllm_flex_prefill_rows": shown(rows, ".0f", src)}


def _flex_concurrency() -> dict:
    """vLLM's FLEX arm with several requests: ITL by context and number of requests."""
    table, src = rc.load_points(), f"data/{rc.H200_STUDY}/{arms.FLEX.slug}/concurrency.csv"
    out = {}
    for context in (2048, 32768):
        for requests in (1, 4, 16, 64):
            point = rc.point(table, FLEX, context, requests) if not table.empty else None
            out[f"flexconc_{context}_{requests}"] = shown(point["itl_ms"] if point else None, ".1f", src, " ms")
    return out


def values_vs_shapes() -> dict:
    data = value_dependence.read()
    src = data.source if data else f"data/{value_dependence.DATASET}/{value_dependence.FILE}"
    out = {"values_status": Fact(f"measured ({src})" if data else None, src)}
    ops = data.ops() if data else []
    matmul = next((op for op in ops if "matmul" in op.lower() or "mm" in op.lower()), None)
    kernel = next((op for op in ops if op != matmul), None)  # the other op: our attention kernel
    for key, op in (("matmul", matmul), ("kernel", kernel)):
        out[f"values_{key}_op"] = Fact(op, src)
        out[f"values_{key}_max_pct"] = shown(data.largest_change_pct(op) if op else None, ".1f", src, "%")
        watts = data.power_range(op) if op else None
        out[f"values_{key}_power"] = Fact(f"{watts[0]:.0f} to {watts[1]:.0f} W" if watts else None, src)
    return out


def chunk(table) -> dict:
    comparison = variants.chunk_comparison(table)
    src = f"data/h200/vllm0.26-qwen2.5-7b-chunk2048/{arms.FA3.slug}/sweep.csv"
    out = {"chunk_status": Fact("measured" if comparison else None, src)}
    for size in ("small", "large"):
        fit = getattr(comparison, size) if comparison else None
        out[f"chunk_{size}"] = shown(getattr(comparison, f"{size}_chunk") if comparison else None, "d", src)
        out[f"chunk_{size}_a"] = shown(fit.a * 1e3 if fit else None, ".1f", src, " ms")
        out[f"chunk_{size}_b"] = shown(fit.b_us_per_token if fit else None, ".2f", src, " µs/token")
        out[f"chunk_{size}_c"] = shown(fit.c_ps_per_token2 if fit else None, ".0f", src, " ps/token²")
    out |= chunk_reread(comparison, src)
    for coefficient in ("a", "b", "c"):
        moved = None if comparison is None else ("moved" if comparison.moved(coefficient) else "did not move")
        out[f"chunk_{coefficient}_moved"] = Fact(moved, src)
        out[f"chunk_{coefficient}_ratio"] = shown(comparison.ratio(coefficient) if comparison else None, ".2f", src, "×")
    return out


def chunk_reread(comparison, src: str, n: int = 32768) -> dict:
    """How much of the quadratic time the smaller chunks added at n is the cached prefix read once more per chunk
    (compulsory K/V bytes, lab.results.iomodel.chunked_prefill_bytes) at the H200's bandwidth ceiling."""
    shape = qwen25_7b()
    block = iomodel.flash_block_size(shape.head_dim, device("H200-SXM").smem_per_sm, 2)

    def extra_ms(chunk: int) -> float:
        counts = iomodel.chunked_prefill_bytes(shape, n, chunk, block)
        extra = shape.layers * (counts["chunked"]["compulsory"] - counts["single"]["compulsory"])
        return 1e3 * extra / ceiling("H200-SXM")

    if comparison is None:
        reread = added = None
    else:
        reread = extra_ms(comparison.small_chunk) - extra_ms(comparison.large_chunk)
        added = 1e3 * (comparison.small.c - comparison.large.c) * n**2
    return {"chunk_eval_n": Fact(n, src), "chunk_c_added_ms": shown(added, ".0f", src, " ms"),
            "chunk_reread_ms": shown(reread, ".1f", src, " ms"),
            "chunk_reread_pct": shown(100 * reread / added if added else None, ".0f", src, "%")}


def fa2_fa3(table, h200: str) -> dict:
    versus, src = report.compare_arms(table, h200, FA2, FA3), f"data/{h200}/*/sweep.csv"
    c_of = report.fit_summary(table, h200).set_index("arm")["c_ps_per_token2"]
    ready = {arm: (report.provenance(table, h200, arm).get("server") or {}).get("ready_s") for arm in (FA2, FA3)}
    longest, shortest = versus.iloc[-1], versus.iloc[0]
    return {"fa2_long_n": Fact(int(longest["n"]), src), "fa2_ttft_ratio_long": Fact(longest["TTFT ratio"], src),
            "fa2_c": Fact(c_of[FA2], src), "fa3_c": Fact(c_of[FA3], src), "fa2_c_ratio": Fact(c_of[FA2] / c_of[FA3], src),
            "fa2_short_n": Fact(int(shortest["n"]), src), "fa2_itl_ratio_short": Fact(shortest["ITL ratio"], src),
            "fa2_itl_ratio_long": Fact(longest["ITL ratio"], src),
            "fa2_ready_s": shown(ready[FA2], ".0f", src), "fa3_ready_s": shown(ready[FA3], ".0f", src)}


def against_floor(table, a10g: str, h200: str) -> dict:
    out = {}
    rows = report.against_floor(table, a10g).set_index(["arm", "n"])
    longest = int(report.fit_summary(table, a10g).set_index("arm").loc[FLASH, "longest"])
    for name, arm in (("fa", FLASH), ("flex", FLEX)):
        for what in ("ttft", "itl"):
            out[f"a10g_{name}_{what}_x_floor_long"] = Fact(rows.loc[(arm, longest), f"{what}_x_floor"], f"data/{a10g}/sweep.csv")
    h = report.against_floor(table, h200)
    fa3_x = h[h["arm"] == FA3].set_index("n")["ttft_x_floor"]
    flex_x = h[h["arm"] == FLEX].set_index("n")["ttft_x_floor"]
    mid = 8192 if 8192 in fa3_x.index and 8192 in flex_x.index else int(flex_x.index[len(flex_x) // 2])
    src = f"data/{h200}/*/sweep.csv"
    return out | {"h200_floor_mid": Fact(mid, src), "h200_fa3_x_mid": Fact(fa3_x.loc[mid], src),
                  "h200_fa3_x_long": Fact(fa3_x.iloc[-1], src), "h200_fa3_x_long_n": Fact(int(fa3_x.index[-1]), src),
                  "h200_flex_x_mid": Fact(flex_x.loc[mid], src), "h200_flex_x_long": Fact(flex_x.iloc[-1], src),
                  "h200_flex_x_long_n": Fact(int(flex_x.index[-1]), src)}


def batch() -> dict:
    src, points = "lab.results.concurrency", rc.load_points()
    data_src = f"data/{rc.H200_STUDY}"
    bandwidth, _ = rc.floor_bandwidth()
    table = rc.with_floor(points, bandwidth)
    contexts, concurrency = (2048, 32768), (1, 4, 16, 64)
    low, high, long = min(concurrency), max(concurrency), max(contexts)
    weights = rc.weight_bytes_per_step()
    out = {"batch_kv_bound_long": Fact(math.floor(rc.kv_bound_batch(long)) + 1, src),
           "batch_kv_bound_short": Fact(math.floor(rc.kv_bound_batch(min(contexts))) + 1, src),
           "batch_long": Fact(long, src), "batch_short": Fact(min(contexts), src),
           "batch_low": Fact(low, src), "batch_high": Fact(high, src),
           "batch_weights_gb": Fact(weights / 1e9, src)}
    for b in (4, 16):  # either side of where the model puts the KV-bound batch at the long context
        point = rc.point(table, FA3, long, b)
        out[f"batch_{b}_fa_itl"] = shown(point["itl_ms"] if point else None, ".1f", data_src, " ms")
        out[f"batch_{b}_fa_x_floor"] = shown(point["itl_x_floor"] if point else None, ".2f", data_src, "×")
    for b in (low, high):
        floor_s = rc.floor_step_s(b, long, bandwidth)
        kv = rc.kv_bytes_per_step(b, long)
        out[f"batch_{b}_floor_itl"] = rc.floor_fact(b, long)
        out[f"batch_{b}_floor_tok_s"] = Fact(b / floor_s, src)
        out[f"batch_{b}_kv_share"] = Fact(100 * kv / (kv + weights), src)
        for name, arm in (("fa", FA3), ("flex", FLEX)):
            point = rc.point(table, arm, long, b)  # its floor is that of the batch vLLM admitted
            out[f"batch_{b}_{name}_itl"] = shown(point["itl_ms"] if point else None, ".1f", data_src, " ms")
            out[f"batch_{b}_{name}_x_floor"] = shown(point["itl_x_floor"] if point else None, ".1f", data_src, "×")
    # the FLEX arm was run only up to a few requests at the long context (a quarter of a second per step there)
    flex = table[(table["arm"] == FLEX) & (table["context"] == long)] if not table.empty else table
    top = rc.point(table, FLEX, long, int(flex["concurrency"].max())) if not flex.empty else None
    out |= {"batch_flex_top_n": shown(int(top["concurrency"]) if top else None, "d", data_src),
            "batch_flex_top_itl": shown(top["itl_ms"] if top else None, ".1f", data_src, " ms"),
            "batch_flex_top_x_floor": shown(top["itl_x_floor"] if top else None, ".0f", data_src, "×")}
    return out


def tensor_parallel(table) -> dict:
    shape, split = qwen25_7b(), variants.tensor_parallel(table)
    src, data_src = "lab.results.modelshape", f"data/h200x2/vllm0.26-qwen2.5-7b-tp2/{arms.FA3.slug}/sweep.csv"
    gpus = split.gpus if split else 2
    weights = 2 * (shape.layers * shape.linear_weights_per_layer + shape.lm_head_weights)
    bandwidth = ceiling("H200-SXM")
    out = {"tp_gpus": Fact(gpus, src), "tp_kv_heads_per_gpu": Fact(max(1, shape.kv_heads // gpus), src),
           "tp_q_heads_per_gpu": Fact(shape.q_heads // gpus, src),
           # o_proj and down_proj end in an all-reduce (RowParallelLinear), and so does the vocab-parallel
           # embedding (VocabParallelEmbedding.forward): 2 per layer + 1 per forward pass
           "tp_allreduces": Fact(2 * shape.layers + 1, "vllm 0.26: qwen2.py, linear.py, vocab_parallel_embedding.py"),
           "tp_allreduce_kb": Fact(shape.hidden * 2 / 1e3, src),
           "tp_weights_floor_one": Fact(weights / bandwidth * 1e3, bandwidth_ceiling("H200-SXM").source),
           "tp_weights_floor_split": Fact(weights / gpus / bandwidth * 1e3, bandwidth_ceiling("H200-SXM").source)}
    if split:
        i = len(split.lengths) - 1
        overhead = split.itl_overhead_ms()
    out |= {"tp_long_n": shown(split.lengths[i] if split else None, ",d", data_src),
            "tp_ttft_ratio": shown(split.ttft_one[i] / split.ttft_split[i] if split else None, ".2f", data_src, "×"),
            "tp_itl_one": shown(split.itl_one[0] if split else None, ".2f", data_src, " ms"),
            "tp_itl_split": shown(split.itl_split[0] if split else None, ".2f", data_src, " ms"),
            "tp_itl_short_n": shown(split.lengths[0] if split else None, ",d", data_src),
            "tp_overhead_ms": shown(overhead[0] if split else None, ".2f", data_src, " ms"),
            "tp_gap_one": shown(split.itl_one[0] - split.decode_floor_one_ms[0] if split else None, ".2f", data_src, " ms"),
            "tp_gap_split": shown(split.itl_split[0] - split.decode_floor_split_ms[0] if split else None, ".2f",
                                  data_src, " ms")}
    return out | tensor_parallel_window(gpus)


def tensor_parallel_window(gpus: int, tokens: int = 8192) -> dict:
    """One prefill window of the TP server beside the one-GPU window of the same prompt (census, ms)."""
    from lab.results import census_windows as cw

    table, src = cw.census_table(), f"data/h200x2/vllm0.26-qwen2.5-7b-tp2/traces/{arms.FA3.slug}/census.csv"
    split, one = (cw.window(table, g, "prefill", tokens, "FlashAttention") for g in (f"{gpus}x H200", "H200"))
    ms = lambda w, fam: shown(w.ms.get(fam) if w.known else None, ".1f", src, " ms")
    comm = split.ms.get("communication") if split.known else None
    window = next((w for w in cw.measured_windows() if w["gpu"] == f"{gpus}x H200" and w["window"] == f"prefill-{tokens}"),
                  None)
    launches = window["launches"].get("communication") if window else None
    return {"tp_window_n": Fact(tokens, src), "tp_window_ms": shown(split.window_ms if split.known else None, ".0f", src, " ms"),
            "one_window_ms": shown(one.window_ms if one.known else None, ".0f", src, " ms"),
            "tp_comm_ms": ms(split, "communication"), "tp_attn_ms": ms(split, "attention"),
            "one_attn_ms": ms(one, "attention"), "tp_matmul_ms": ms(split, "matmul"), "one_matmul_ms": ms(one, "matmul"),
            "tp_comm_pct": shown(100 * comm / split.window_ms if comm is not None else None, ".0f", src, "%"),
            "tp_comm_launches": shown(launches, "d", src)}


def chapter06(table) -> dict:
    """Every fact of chapter 6 (the A10G reference study and our H200 studies must be on file)."""
    a10g, h200 = report.A10G_STUDY, report.find_study(table, "H200")
    return (setup(table, a10g, h200) | a10g_prefill(table, a10g) | h200_prefill(table, h200)
            | decode(table, a10g, h200) | flex_arm(table, h200) | values_vs_shapes() | chunk(table)
            | fa2_fa3(table, h200) | against_floor(table, a10g, h200) | batch() | tensor_parallel(table)
            | flex_counters())

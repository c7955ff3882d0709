"""Chapter 6's facts of the Flex section: vLLM's FLEX arm in our traces, the standalone decomposition, its
Nsight Compute counters, and Flex against cuDNN on plain causal attention."""

from __future__ import annotations

import math
from pathlib import Path

from lab import names
from lab.book.facts import Fact
from lab.book.pages.ch06.quantities import (
    CAUSAL_N,
    DEC_EXTRA,
    DEC_GBS,
    DEC_LENGTH,
    DEC_MS,
    DEC_PCT,
    DEC_PROGRAMS,
    DEC_ROWS,
    DEC_TFLOPS,
    DEC_VLLM,
    FA3,
    FLEX,
    FLEX_VARIANTS,
    VLLM_KERNEL_MS,
    VLLM_PREFILL_TFLOPS,
    VLLM_PROGRAMS,
    VLLM_ROWS,
    VLLM_STEP_MS,
    VLLM_TOKENS,
    concurrency_points,
    decomposition,
    h200_study,
    sweep_table,
)
from lab.results import concurrency as rc
from lab.results import flex_counters as fc
from lab.results import flex_decomposition as flexdec
from lab.results import kernel_runs, paged
from lab.results import sweeps as report
from lab.results.bandwidth import bandwidth_ceiling, ceiling
from lab.results.data import DATA_DIR, load

# --- facts: vLLM's FLEX arm and the decomposition ----------------------------------------------------------------

def flex_arm_facts(root: Path = DATA_DIR) -> dict:
    """vLLM's FLEX arm from our traces, and the standalone decomposition (under ``root``) when it is on file."""
    vllm, fa3, dec = flexdec.vllm_flex(), flexdec.vllm_flex(backend="FlashAttention", arm=FA3), decomposition(root)
    out = {"vllm_flex_tokens": VLLM_TOKENS.fact(vllm.tokens),
           "vllm_flex_step_ms": VLLM_STEP_MS.fact(vllm.decode_ms_per_step, vllm.tokens, fmt="{:.0f} ms"),
           "vllm_flex_prefill_tflops": VLLM_PREFILL_TFLOPS.fact(vllm.prefill_tflops, FLEX, vllm.tokens, fmt=".0f"),
           "vllm_fa3_prefill_tflops": VLLM_PREFILL_TFLOPS.fact(fa3.prefill_tflops, FA3, vllm.tokens, fmt=".0f"),
           "flexdec_status": Fact(f"measured on the {dec.gpu}, {dec.source}" if dec else None, DEC_MS.source),
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


def _grid_text(grid) -> str:
    """A launch grid as prose writes it: "512 × 1 × 28"."""
    return " × ".join(f"{size:,}" for size in grid)


def _vllm_flex_kernels() -> dict:
    """vLLM's own Flex kernel in the 28k windows: its grid, and the query rows per program it implies."""
    tokens = flexdec.VLLM_WINDOW_TOKENS
    decode, prefill = flexdec.vllm_kernels(f"decode-{tokens}"), flexdec.vllm_kernels(f"prefill-{tokens}")
    main, chunk = (decode[0] if decode else None), (prefill[0] if prefill else None)  # most calls: the full chunks
    rows = report.chunk_size(sweep_table(), h200_study()) / chunk.grid[0] if chunk else None
    return {"vllm_flex_decode_grid": Fact(_grid_text(main.grid) if main else None, VLLM_PROGRAMS.source),
            "vllm_flex_decode_programs": VLLM_PROGRAMS.fact(main.programs if main else None, "decode", fmt="d"),
            "vllm_flex_decode_kernel_ms": VLLM_KERNEL_MS.fact(main.ms_per_call if main else None, fmt="{:.2f} ms"),
            "vllm_flex_prefill_grid": Fact(_grid_text(chunk.grid) if chunk else None, VLLM_PROGRAMS.source),
            "vllm_flex_prefill_rows": VLLM_ROWS.fact(rows, fmt=".0f")}


def _flex_concurrency() -> dict:
    """vLLM's FLEX arm with several requests: ITL by context and number of requests."""
    table, out = concurrency_points(), {}
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


def window_mask_facts() -> dict:
    """Flex with a causal sliding window against the fastest SDPA backend that accepts that mask (a dense boolean
    mask), at the same shape, in the mask study (chapter 5b's run, under its quantities)."""
    impl, sdpa_ms = paged.fastest_sdpa("sliding-window", CAUSAL_N)
    flex = paged.masks_table()
    flex = flex[(flex["mask"] == "sliding-window") & (flex.impl == "flex") & (flex.n == CAUSAL_N)] if flex is not None else None
    flex_ms = float(flex.ms.iloc[0]) if flex is not None and len(flex) and not math.isnan(flex.ms.iloc[0]) else None
    window = paged.mask_window()
    return {"mask_window": paged.MASK_WINDOW.fact(window, fmt="{:,d}"),
            "window_flex_ms": paged.MASK_TIME.fact(flex_ms, "sliding-window", "flex", CAUSAL_N, fmt="{:.2f} ms"),
            "window_sdpa_ms": paged.MASK_TIME.fact(sdpa_ms, "sliding-window", impl, CAUSAL_N, fmt="{:.2f} ms"),
            "window_sdpa_impl": Fact(impl, paged.source(paged.MASKS_RUN))}


# --- facts: Nsight Compute on Flex's decode (lab.results.flex_counters) ----------------------------------------

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
        row, key = rows.get((candidate, batch)), f"flexctr_{names.key(candidate)}_b{batch}"
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

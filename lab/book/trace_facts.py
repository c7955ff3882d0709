"""Chapter 7's facts: the census readings of lab.results.trace_analysis as glue-ready values."""

from __future__ import annotations

from lab.book.facts import Fact
from lab.measure.vllm.arms import FLASH, FLEX
from lab.results import census_windows as cd
from lab.results import trace_analysis as ta
from lab.results.data import load
from lab.results.hardware import DEVICES
from lab.results.modelshape import qwen25_7b
from lab.results.reference import DATASET as A10G_DATASET

A10G_SRC = f"data/{A10G_DATASET}/census.csv"
H200_SRC = "data/h200/vllm0.26-qwen2.5-7b/traces"


def a10g(table) -> dict:
    control = ta.control(table, "A10G")
    short = ta.attention_pair(table, "A10G", "prefill", ta.SHORT)
    return {"a10g_mm28_fa": Fact(control.matmul_flash, A10G_SRC), "a10g_mm28_fx": Fact(control.matmul_flex, A10G_SRC),
            "a10g_mm28_diff_pct": Fact(control.matmul_diff_pct, A10G_SRC),
            "a10g_at28_fa": Fact(control.attention_flash, A10G_SRC), "a10g_at28_fx": Fact(control.attention_flex, A10G_SRC),
            "a10g_at28_ratio": Fact(control.attention_ratio, A10G_SRC),
            "a10g_at28_extra_s": Fact(control.extra_attention_s, A10G_SRC),
            "a10g_at2_fa": Fact(short[0], A10G_SRC), "a10g_at2_fx": Fact(short[1], A10G_SRC),
            "a10g_at2_ratio": Fact(short[1] / short[0], A10G_SRC),
            "a10g_mm2_est": Fact(ta.scaled_matmul_estimate(table), A10G_SRC)}


def h200(table) -> dict:
    control, launches = ta.control(table, "H200"), ta.matmul_launch_comparison()
    fa_clock, fx_clock = ta.window_clock(backend=ta.FLASH), ta.window_clock(backend=ta.FLEX)
    per_step = ta.decode_per_step(table)
    out = {"h200_mm28_fa": Fact(control.matmul_flash, H200_SRC), "h200_mm28_fx": Fact(control.matmul_flex, H200_SRC),
           "h200_mm28_diff_pct": Fact(control.matmul_diff_pct, H200_SRC),
           "h200_control_verdict": Fact("within" if control.holds else "beyond", H200_SRC),
           "control_tolerance": Fact(ta.CONTROL_TOLERANCE_PCT, "lab.results.trace_analysis"),
           "h200_at28_fa": Fact(control.attention_flash, H200_SRC), "h200_at28_fx": Fact(control.attention_flex, H200_SRC),
           "h200_at28_ratio": Fact(control.attention_ratio, H200_SRC),
           "h200_share_fa": Fact(control.share_flash, H200_SRC), "h200_share_fx": Fact(control.share_flex, H200_SRC),
           "h200_same_launches": Fact("the same matmul kernels the same number of times" if launches.same_work
                                      else "different matmul kernels or counts", H200_SRC),
           "h200_slower_max": Fact(launches.slower_max_pct, H200_SRC),
           "h200_slower_min": Fact(launches.slower_min_pct, H200_SRC)}
    for tag, clock in (("fa", fa_clock), ("fx", fx_clock)):
        out |= {f"clock_{tag}_mhz": Fact(clock.sm_mhz_median, H200_SRC), f"clock_{tag}_w": Fact(clock.power_w_median, H200_SRC),
                f"clock_{tag}_limit": Fact(clock.limit if clock.limit != "none" else "no limit", H200_SRC),
                f"clock_{tag}_limit_pct": Fact(100 * clock.limit_share, H200_SRC)}
    for (backend, n), values in per_step.items():
        tag = "fa" if backend == ta.FLASH else "fx"
        out[f"step_{tag}_{n // 1024}k_attn"] = Fact(values["attention"], H200_SRC)
        out[f"step_{tag}_{n // 1024}k_mm"] = Fact(values["matmul"], H200_SRC)
    out["step_fx_growth"] = Fact(per_step[ta.FLEX, ta.LONG]["attention"] / per_step[ta.FLEX, ta.SHORT]["attention"], H200_SRC)
    out["step_context_ratio"] = Fact(ta.LONG // ta.SHORT, "lab.results.trace_analysis")
    return out


def decode_names() -> dict:
    model, reference = qwen25_7b(), load(A10G_DATASET)
    names = reference.csv("decode_kernels.csv", ("arm", "phase", "kernel")).set_index("arm")["kernel"]
    src = f"data/{A10G_DATASET}/decode_kernels.csv"
    return {"q_heads": Fact(model.q_heads, "lab.results.modelshape"), "kv_heads": Fact(model.kv_heads, "lab.results.modelshape"),
            "group": Fact(model.q_heads // model.kv_heads, "lab.results.modelshape"),
            "sm_a10g": Fact(DEVICES["A10G"].sm_count, "lab.results.hardware"),
            "sm_h200": Fact(DEVICES["H200-SXM"].sm_count, "lab.results.hardware"),
            "a10g_decode_fa": Fact(names[FLASH.label], src), "a10g_decode_fx": Fact(names[FLEX.label], src)}


def naive(table) -> dict:
    reference = load(A10G_DATASET)
    itl = reference.csv("decode_summary.csv", ("arm", "long_len", "long_itl_ms")).set_index("arm")["long_itl_ms"]
    out = {"naive_gen": Fact(cd.REFERENCE_DECODE_WINDOW_TOKENS, "lab.results.census_windows")}
    for tag, backend, arm in (("fa", ta.FLASH, FLASH.label), ("fx", ta.FLEX, FLEX.label)):
        w = ta.naive_window(table, backend, float(itl[arm]))
        out |= {f"naive_{tag}_s": Fact(w.window_s, A10G_SRC), f"naive_{tag}_prefill_s": Fact(w.prefill_kernels_s, A10G_SRC),
                f"naive_{tag}_prefill_pct": Fact(w.prefill_pct, A10G_SRC), f"naive_{tag}_decode_s": Fact(w.decode_s, A10G_SRC),
                f"naive_{tag}_decode_pct": Fact(w.decode_pct, A10G_SRC), f"naive_{tag}_share": Fact(w.attention_share, A10G_SRC)}
    for row in ta.naive_split():
        tag = "fa" if row["arm"].startswith("FLASH") else "fx"
        out |= {f"h200_naive_{tag}_prefill_steps": Fact(row["prefill_steps"], H200_SRC),
                f"h200_naive_{tag}_decode_steps": Fact(row["decode_steps"], H200_SRC),
                f"h200_naive_{tag}_prefill_pct": Fact(row["prefill_pct"], H200_SRC)}
    return out


def chapter07(table) -> dict:
    return a10g(table) | h200(table) | decode_names() | naive(table)

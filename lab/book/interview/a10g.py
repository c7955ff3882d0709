"""The published A10G study (vLLM 0.11, Qwen2.5-7B, bf16) and what lab derives from it, as facts.

The decode part carries the book's reconciliation of two claims. At batch 1 a decode step reads the
weights plus the KV cache; the KV part is linear in context, so there is no quadratic term for tiling to
remove. Each backend's KV read rate (the slope of its ITL against context, :func:`lab.results.sweeps.kv_read_fact`,
as chapter 6 measures it) against the A10G's bandwidth ceiling (its datasheet's) tells whether its kernel pulls
the bandwidth the GPU has or not.
"""

from __future__ import annotations

import math

from lab.book.facts import Fact
from lab.book.interview.common import A10G, FLASH, FLEX, GB, row
from lab.results import data, hardware, iomodel, sweeps
from lab.results.bandwidth import ceiling
from lab.results.concurrency import floor_fact, floor_step_s
from lab.results.modelshape import qwen25_7b


def _devices() -> dict:
    """The A10G's multiprocessors, the parallel work a decode kernel must fill (chapter 6 states it)."""
    return {"a10g_sms": hardware.device("A10G").sm_count}


def sweep_lengths() -> tuple[int, int, int]:
    """Shortest, nearest-2k and longest target length of the A10G sweep."""
    lengths = sorted(set(data.load(A10G).csv("sweep.csv", ["target_len"])["target_len"]))
    return int(lengths[0]), int(min(lengths, key=lambda n: abs(n - 2048))), int(lengths[-1])


def _sweep() -> dict:
    """Fits, TTFT/ITL at the ends of the sweep, and the decode floors at its ends."""
    ds = data.load(A10G)
    sweep, fits = ds.csv("sweep.csv", data.SWEEP_COLUMNS), ds.csv("fits.csv", ["arm", "b_us_per_token", "c_ps_per_token2"])
    kernels = ds.csv("decode_kernels.csv", ["arm", "phase", "kernel"])
    short, two_k, long = sweep_lengths()
    at = lambda arm, n, col: float(row(sweep, arm=arm, target_len=n)[col])
    f = {"a10g_short_len": short, "a10g_two_k_len": two_k, "a10g_long_len": long}
    for arm, key in ((FLASH, "flash"), (FLEX, "flex")):
        fit = row(fits, arm=arm)
        f[f"b_{key}"], f[f"c_{key}"] = float(fit["b_us_per_token"]), float(fit["c_ps_per_token2"])
        for end, n in (("short", short), ("2k", two_k), ("long", long)):
            f[f"ttft_{key}_{end}"], f[f"itl_{key}_{end}"] = at(arm, n, "ttft_s"), at(arm, n, "itl_ms")
        f[f"itl_{key}_growth_pct"] = 100 * (f[f"itl_{key}_long"] / f[f"itl_{key}_short"] - 1)
        f[f"itl_{key}_extra_ms"] = f[f"itl_{key}_long"] - f[f"itl_{key}_short"]
        f[f"kernel_{key}"] = str(row(kernels, arm=arm, phase="decode")["kernel"])
    f["c_ratio"] = f["c_flex"] / f["c_flash"]
    for end in ("short", "long"):
        f[f"ttft_ratio_{end}"] = f[f"ttft_flex_{end}"] / f[f"ttft_flash_{end}"]
    f["itl_ratio_long"] = f["itl_flex_long"] / f["itl_flash_long"]
    f["itl_gap_2k"], f["itl_gap_long"] = f["itl_flex_2k"] - f["itl_flash_2k"], f["itl_flex_long"] - f["itl_flash_long"]
    # A request of k output tokens costs TTFT + k·ITL; decode equals the prefill at k = TTFT / ITL (FLASH_ATTN).
    k = round(1e3 * f["ttft_flash_long"] / f["itl_flash_long"])
    f["decode_equals_prefill_tokens"] = k
    f["request_ratio_long"] = ((f["ttft_flex_long"] + k * f["itl_flex_long"] / 1e3)
                               / (f["ttft_flash_long"] + k * f["itl_flash_long"] / 1e3))
    bandwidth = ceiling("A10G")  # its datasheet figure: this project never ran an A10G
    f["floor_short_ms"], f["floor_long_ms"] = (1e3 * floor_step_s(1, n, bandwidth) for n in (short, long))
    f["floor_growth_pct"] = 100 * (f["floor_long_ms"] / f["floor_short_ms"] - 1)
    f["floor_extra_ms"] = f["floor_long_ms"] - f["floor_short_ms"]
    f["kv_extra_gb"] = (long - short) * qwen25_7b().kv_bytes_per_token(2) / GB
    f["chunk_a10g"] = int(ds.provenance["flags"]["max_num_batched_tokens"])
    f["chunks_long"] = math.ceil(long / f["chunk_a10g"])
    return f


def _shares_and_census() -> dict:
    """The published quadratic shares and the census of the 28k prefill and 'decode' windows."""
    ds = data.load(A10G)
    share = ds.csv("quad_share.csv", ["arm", "n", "share_pct"])
    census = ds.csv("census.csv", ["phase", "tokens", "arm", "metric", "value"])
    share_len = int(share["n"].max())
    window = int(census.query("phase == 'prefill'")["tokens"].max())
    c = lambda phase, arm, metric: float(row(census, phase=phase, tokens=window, arm=arm, metric=metric)["value"])
    f = {"share_len": share_len, "census_len": window,
         "share_flash_pct": float(row(share, arm=FLASH, n=share_len)["share_pct"]),
         "share_flex_pct": float(row(share, arm=FLEX, n=share_len)["share_pct"]),
         "attn_flop_share_share_len_pct": 100 * iomodel.attention_flop_share(qwen25_7b(), share_len),
         "mm_flash": c("prefill", FLASH, "matmul_ms"), "mm_flex": c("prefill", FLEX, "matmul_ms"),
         "attn_flash": c("prefill", FLASH, "attention_ms"), "attn_flex": c("prefill", FLEX, "attention_ms"),
         "decode_window_flash_s": c("decode", FLASH, "window_s"), "decode_window_flex_s": c("decode", FLEX, "window_s")}
    f["mm_diff_pct"] = 100 * abs(f["mm_flex"] / f["mm_flash"] - 1)
    f["attn_ratio"] = f["attn_flex"] / f["attn_flash"]
    f["prefill_kernels_flash_s"] = (f["mm_flash"] + f["attn_flash"]) / 1e3
    return f


def a10g_facts() -> dict[str, Fact]:
    """Figures of the published A10G study and what lab derives from them, each with its source."""
    sources = {_devices: "datasheet: lab.results.hardware",
               _sweep: f"{A10G}/sweep.csv, fits.csv, decode_kernels.csv, provenance.json",
               _shares_and_census: f"{A10G}/quad_share.csv, census.csv"}
    out = {name: Fact(value, source) for part, source in sources.items() for name, value in part().items()}
    return out | _bandwidths()


def _bandwidths() -> dict[str, Fact]:
    """The decode floors and KV read rates the interview quotes, as the facts every chapter glues."""
    table = sweeps.sweep_table()
    short, _, long = sweep_lengths()
    out = {"floor_short_ms": floor_fact(1, short, "A10G"), "floor_long_ms": floor_fact(1, long, "A10G")}
    for arm, key in ((FLASH, "flash"), (FLEX, "flex")):
        out[f"kv_bw_{key}_gb_s"] = sweeps.kv_read_fact(table, A10G, arm)
        out[f"kv_bw_{key}_pct"] = sweeps.kv_read_pct_fact(table, A10G, arm)
    return out



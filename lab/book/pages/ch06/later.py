"""Facts of chapter 6's runs that the interview page and the course kit state and the chapter's prose does not:
differences and ratios of the sweep points the chapter glues, the concurrency points at 2k tokens and the floors
beside them, the measured concurrencies either side of where the batch turns KV-bound, vLLM's Flex arm against the default Flex call, and the decode
template's speed-up. The chapter glues them with its own facts, so a later page quotes them from this page
(:mod:`lab.book.quoted`) and no page reads these runs again."""

from __future__ import annotations

import math

from lab.book.facts import Fact
from lab.book.pages.ch06.quantities import (
    A10G,
    A10G_RUN,
    FA2,
    FA3,
    FLASH,
    FLEX,
    H200,
    concurrency_points,
    decomposition,
    fit,
    h200_study,
    kv_bound_batch,
    sweep_table,
)
from lab.results import concurrency as rc
from lab.results import flex_counters as fc
from lab.results import flex_decomposition as flexdec
from lab.results import sweeps as report
from lab.results.modelshape import qwen25_7b
from lab.results.quantities import Quantity

_A10G = dict(run=A10G_RUN, file="sweep.csv")
ITL_EXTRA = Quantity("a10g.sweep.itl_extra", "how many milliseconds longer one ITL is than another: an arm's at its "
                     "longest context over its shortest, or one arm's over another's at one context", unit="ms", **_A10G)
DECODE_EQUALS_PREFILL = Quantity("a10g.sweep.decode_equals_prefill_tokens", "output tokens whose decode time (k × "
                                 "ITL) equals the prefill's TTFT at the longest prompt (FLASH_ATTN)", unit="tokens",
                                 **_A10G)
REQUEST_RATIO = Quantity("a10g.sweep.request_ratio", "one arm's whole request (TTFT + k × ITL, k the tokens where "
                         "decode equals prefill) over another's at the longest prompt", unit="×", **_A10G)
PREFILL_CHUNKS = Quantity("a10g.sweep.prefill_chunks", "chunks of max_num_batched_tokens the longest prompt is "
                          "prefilled in", run=A10G_RUN, file="provenance.json", unit="chunks")
FLOOR_EXTRA = Quantity("a10g.decode_floor.extra", "the A10G decode floor at the longest context minus at the "
                       "shortest (the extra KV bytes at the datasheet bandwidth)", run="lab.results.concurrency: "
                       "A10G datasheet", unit="ms")
KV_EXTRA = Quantity("qwen2.5-7b.kv_extra_gb", "the KV cache of the A10G sweep's longest context minus its shortest, "
                    "one sequence, bf16", run="lab.results.modelshape: Qwen2.5-7B config.json", unit="GB")
_CONC = dict(run=rc.H200_STUDY, file="<arm>/concurrency.csv")
CONC_GAP = Quantity("h200.concurrency.itl_minus_floor", "a point's ITL minus the floor of the batch vLLM admitted",
                    unit="ms", **_CONC)
CONC_GAIN = Quantity("h200.concurrency.tok_s_gain", "decode tokens per second of the most requests over one request, "
                     "at one context", unit="×", **_CONC)
CONC_EITHER_SIDE = Quantity("h200.concurrency.either_side_of_kv_bound", "the measured concurrencies just below and "
                            "from the KV-bound batch at 32k (FA3; chapter 6's batch_kv_bound_long)", unit="requests",
                            **_CONC)
VLLM_OVER_DEFAULT = Quantity("h200.flex_decomposition.vllm_over_default", "vLLM's FLEX arm's K/V read rate (trace) "
                             "over the standalone flex-default call's", run=flexdec.DATASET, file=flexdec.FILE, unit="×")
TEMPLATE_SPEEDUP = Quantity("h200.flex_counters.template_speedup", "the general Flex decode kernel's time over the "
                            "decode template's handed a real block mask, batch 1, 32k (Nsight Compute)",
                            run="h200/kernel-counters", file="raw.csv", unit="×")
VLLM_SRC = "data/h200/vllm0.26-qwen2.5-7b/*/provenance.json"


def a10g_facts() -> dict:
    """The A10G sweep's ends compared: ITL differences and ratios, a whole request, the floors' and KV's growth;
    the fitted quadratic shares at the middle published length."""
    table = sweep_table()
    rows = {arm: report.arm_rows(table, A10G_RUN, arm).set_index("target_len") for arm in (FLASH, FLEX)}
    lengths = sorted(rows[FLASH].index)
    short, long = int(lengths[0]), int(lengths[-1])
    two_k = int(min(lengths, key=lambda n: abs(n - 2048)))
    itl = lambda arm, n: float(rows[arm].loc[n, "itl_ms"])  # noqa: E731
    ttft = lambda arm, n: float(rows[arm].loc[n, "ttft_s"])  # noqa: E731
    k = round(1e3 * ttft(FLASH, long) / itl(FLASH, long))
    request = lambda arm: ttft(arm, long) + k * itl(arm, long) / 1e3  # noqa: E731
    chunk = int(report.provenance(table, A10G_RUN)["flags"]["max_num_batched_tokens"])
    # the prompts as the tokens they had (chapter 6's a10g_short_len), not the lengths the study asked for
    tokens = {n: int(rows[FLASH].loc[n, "actual_len"]) for n in (short, long)}
    floors = [rc.floor_fact(1, tokens[n], "A10G") for n in (short, long)]
    kv = qwen25_7b().kv_bytes_per_token(2)
    out = {"share_len": A10G["length"].fact(report.SHARE_AT[-1], "the quadratic share's"),
           "ttft_ratio_short": A10G["ttft_ratio"].fact(ttft(FLEX, short) / ttft(FLASH, short), FLEX, FLASH, short),
           "itl_ratio_long": A10G["itl_ratio"].fact(itl(FLEX, long) / itl(FLASH, long), FLEX, FLASH, long),
           "itl_gap_2k": ITL_EXTRA.fact(itl(FLEX, two_k) - itl(FLASH, two_k), FLEX, FLASH, two_k),
           "itl_gap_long": ITL_EXTRA.fact(itl(FLEX, long) - itl(FLASH, long), FLEX, FLASH, long),
           "decode_equals_prefill_tokens": DECODE_EQUALS_PREFILL.fact(k),
           "request_ratio_long": REQUEST_RATIO.fact(request(FLEX) / request(FLASH), FLEX, FLASH, long),
           "chunks_long": PREFILL_CHUNKS.fact(math.ceil(long / chunk), long),
           "floor_extra_ms": FLOOR_EXTRA.fact(floors[1].value - floors[0].value, tokens[short], tokens[long]),
           "kv_extra_gb": KV_EXTRA.fact((tokens[long] - tokens[short]) * kv / 1e9, tokens[short], tokens[long])}
    for key, arm in (("flash", FLASH), ("flex", FLEX)):
        out[f"itl_{key}_extra_ms"] = ITL_EXTRA.fact(itl(arm, long) - itl(arm, short), arm, long, short)
    return out | _a10g_mid_shares(table)


def _a10g_mid_shares(table) -> dict:
    """The quadratic share of each arm's fit at the middle of the lengths the study published shares at (the
    course kit's Exercise 3 sets it beside the published share)."""
    fits, mid = fit(table, A10G_RUN), report.SHARE_AT[len(report.SHARE_AT) // 2]
    out = {"a10g_share_mid_len": A10G["length"].fact(mid, "middle of the published shares")}
    for key, arm in (("fa", FLASH), ("flex", FLEX)):
        out[f"a10g_{key}_share_mid"] = A10G["share"].fact(fits.loc[arm, f"share_{mid}_pct"], arm, mid)
    return out


def h200_facts() -> dict:
    """The H200 sweep at the longest length FA3 and FLEX both ran (and FA2 there), its vLLM and its chunks."""
    table, study = sweep_table(), h200_study()
    rows = {arm: report.arm_rows(table, study, arm).set_index("target_len") for arm in (FA3, FLEX, FA2)}
    n = int(max(set(rows[FA3].index) & set(rows[FLEX].index)))
    n2 = int(max(set(rows[FA3].index) & set(rows[FA2].index)))
    ttft = lambda arm, at: float(rows[arm].loc[at, "ttft_s"])  # noqa: E731
    study_rows = table[table["study"].str.startswith("h200/vllm0.26-qwen2.5-7b")]
    versions = sorted({str(v) for v in study_rows["vllm"].dropna()})
    chunks = sorted({int(c) for c in study_rows["chunk"].dropna()})
    return {"h200_itl_fa3": H200["itl"].fact(float(rows[FA3].loc[n, "itl_ms"]), FA3, n, fmt=".1f"),
            "h200_ttft_ratio": H200["ttft_ratio"].fact(ttft(FLEX, n) / ttft(FA3, n), FLEX, FA3, n, fmt=".1f"),
            "h200_ttft_fa2": H200["ttft"].fact(ttft(FA2, n2), FA2, n2, fmt=".2f"),
            "h200_ttft_fa3_fa2_len": H200["ttft"].fact(ttft(FA3, n2), FA3, n2, fmt=".2f"),
            "h200_vllm": Fact(", ".join(versions) or None, VLLM_SRC),
            "h200_chunks": Fact(" and ".join(f"{c:,}" for c in chunks) or None, VLLM_SRC)}


def concurrency_facts() -> dict:
    """FA3 at 2k and 32k tokens with 1 to 64 requests: each point's ITL, its floor, the gap between, tokens per
    second; the measured concurrencies either side of where decode turns KV-bound at 32k (chapter 6's
    ``batch_kv_bound_long``)."""
    table, out = concurrency_points(), {}
    for label, n in (("2k", 2048), ("32k", 32768)):
        for c in (1, 4, 16, 64):
            p = rc.point(table, FA3, n, c)
            get = lambda key, p=p: p[key] if p else None  # noqa: E731
            key = f"conc_fa3_{label}_{c}"
            out |= {key: rc.POINT_ITL.fact(get("itl_ms"), FA3, n, c, fmt="{:.1f} ms"),
                    f"{key}_floor": rc.POINT_FLOOR.fact(get("floor_ms"), FA3, n, c, fmt="{:.1f} ms"),
                    f"{key}_gap": CONC_GAP.fact(get("itl_ms") - get("floor_ms") if p else None, FA3, n, c,
                                                fmt="{:.1f} ms"),
                    f"{key}_tok_s": rc.POINT_TOK_S.fact(get("decode_tok_s"), FA3, n, c, fmt="{:,.0f} tokens/s")}
    # the 32k points chapter 6 states as batch_<c>_fa_itl, and chapter 6b's top bf16 point's throughput, under
    # those names (the top point's floor stays: the chapter's self-check states it beside the others)
    stated = {f"conc_fa3_32k_{c}" for c in (1, 4, 16, 64)} | {"conc_fa3_32k_64_tok_s"}
    out = {name: fact for name, fact in out.items() if name not in stated}
    low, high = out["conc_fa3_2k_1_tok_s"].value, out["conc_fa3_2k_64_tok_s"].value
    out["conc_fa3_2k_tok_s_gain"] = CONC_GAIN.fact(high / low if low and high else None, FA3, 2048, fmt="{:.0f}×")
    first = kv_bound_batch(32768)
    measured = sorted(int(c) for c in table[(table["arm"] == FA3) & (table["context"] == 32768)]["concurrency"])
    below, above = [c for c in measured if c < first], [c for c in measured if c >= first]
    either = below and above
    return out | {
        "kv_bound_below_32k": CONC_EITHER_SIDE.fact(below[-1] if either else None, "below", fmt="{:d}"),
        "kv_bound_from_32k": CONC_EITHER_SIDE.fact(above[0] if either else None, "above", fmt="{:d}")}


def flex_facts() -> dict:
    """vLLM's FLEX arm against the default Flex call, and the decode template's speed-up over the general kernel."""
    dec = decomposition()
    rows = {(r["candidate"], r["batch"]): r for r in fc.table()}
    general, template = rows.get(("flex-default", 1)), rows.get(("flex-pad8-mask", 1))
    speedup = general["ms"] / template["ms"] if general and template else None
    return {"vllm_over_default": VLLM_OVER_DEFAULT.fact(flexdec.vllm_over(dec, flexdec.vllm_flex(), "flex-default")
                                                        if dec else None, fmt="{:.1f}×"),
            "flex_ctr_template_speedup_b1": TEMPLATE_SPEEDUP.fact(speedup, fmt="{:.0f}×")}


def facts() -> dict:
    """Every fact of chapter 6's runs that only later pages state."""
    return a10g_facts() | h200_facts() | concurrency_facts() | flex_facts()

"""The interview's H200 figures that no page module states yet (the vLLM sweeps of chapter 6), as facts glued in
their own format.

Each reader returns values (lengths, times, shares, flags), every one "not measured yet" when its data is
missing, so chapter 08 reads correctly either way; the sentences are in the chapter's markdown.
"""

from __future__ import annotations

from lab.book.interview.common import FA2, FA3, FLEX, row, shown_facts
from lab.results import data, sweeps
from lab.results.bandwidth import bandwidth_ceiling

SWEEPS = "data/h200/vllm0.26-qwen2.5-7b/*/sweep.csv"


# --- vLLM sweeps ----------------------------------------------------------------------------------

SWEEP_FORMATS = {
    "h200_vllm": "", "h200_chunks": "",
    "h200_pair_len": ",d", "h200_ttft_fa3": ".2f", "h200_ttft_flex": ".2f", "h200_ttft_ratio": ".1f",
    "h200_itl_fa3": ".1f", "h200_itl_flex": ".1f",
    "h200_fa2_len": ",d", "h200_ttft_fa3_at_fa2_len": ".2f", "h200_ttft_fa2": ".2f", "h200_fa2_over_fa3": ".2f",
    **{f"h200_{key}_{what}": fmt for key in ("fa3", "flex")
       for what, fmt in (("short_len", ",d"), ("long_len", ",d"), ("itl_short", ".1f"), ("itl_long", ".1f"),
                         ("growth_pct", ".0f"))},
}


def _sweep_values(table) -> dict:
    f = {}
    n = sweeps.longest_common(table, (FA3, FLEX))
    if n is not None:
        fa3, flex = row(table, arm=FA3, target_len=n), row(table, arm=FLEX, target_len=n)
        f.update(h200_pair_len=n, h200_ttft_fa3=float(fa3.ttft_s), h200_ttft_flex=float(flex.ttft_s),
                 h200_ttft_ratio=float(flex.ttft_s / fa3.ttft_s), h200_itl_fa3=float(fa3.itl_ms),
                 h200_itl_flex=float(flex.itl_ms))
    n = sweeps.longest_common(table, (FA3, FA2))
    if n is not None:
        fa3, fa2 = row(table, arm=FA3, target_len=n), row(table, arm=FA2, target_len=n)
        f.update(h200_fa2_len=n, h200_ttft_fa3_at_fa2_len=float(fa3.ttft_s), h200_ttft_fa2=float(fa2.ttft_s),
                 h200_fa2_over_fa3=float(fa2.ttft_s / fa3.ttft_s))
    for key, arm in (("fa3", FA3), ("flex", FLEX)):
        rows = table[(table["arm"] == arm) & table["itl_ms"].notna()].sort_values("target_len")
        if len(rows) < 2:
            continue
        s, l_ = rows.iloc[0], rows.iloc[-1]
        f.update({f"h200_{key}_short_len": int(s.target_len), f"h200_{key}_long_len": int(l_.target_len),
                  f"h200_{key}_itl_short": float(s.itl_ms), f"h200_{key}_itl_long": float(l_.itl_ms),
                  f"h200_{key}_growth_pct": 100 * float(l_.itl_ms / s.itl_ms - 1)})
    versions, chunks = set(), set()
    for ds in data.datasets(kind="vllm-sweep"):  # one scan of the data tree for both
        if ds.name.startswith("h200/"):
            versions.add(ds.provenance.get("vllm") or "")
            if ds.provenance["flags"].get("max_num_batched_tokens"):
                chunks.add(int(ds.provenance["flags"]["max_num_batched_tokens"]))
    f["h200_vllm"] = ", ".join(sorted(v for v in versions if v)) or None
    f["h200_chunks"] = " and ".join(f"{c:,}" for c in sorted(chunks)) or None
    return f


def sweep_facts() -> dict:
    table = sweeps.h200_sweeps()
    out = shown_facts({} if table is None else _sweep_values(table), SWEEP_FORMATS, SWEEPS)
    return out | _kv_read_facts(table is not None)


def _kv_read_facts(measured: bool) -> dict:
    """The H200 ceiling and each arm's KV read rate and its share of the ceiling: the facts chapter 6 glues too."""
    out = {"h200_gb_s": bandwidth_ceiling("H200-SXM").to("GB/s").shown_as(",.0f")}
    if not measured:
        return out
    table = sweeps.sweep_table(data.DATA_DIR)
    for key, arm in (("fa3", FA3), ("flex", FLEX)):
        rate, pct = sweeps.kv_read_fact(table, sweeps.H200_STUDY, arm), sweeps.kv_read_pct_fact(table, sweeps.H200_STUDY, arm)
        out |= {f"h200_{key}_kv_gb_s": rate.shown_as(",.0f"),
                f"h200_{key}_kv_pct": pct.shown_as(".0f")}
    return out


def facts() -> dict:
    """The H200 facts the interview still reads itself: the vLLM sweeps (chapter 6)."""
    return sweep_facts()

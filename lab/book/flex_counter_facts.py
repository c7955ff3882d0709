"""Chapter 6's facts about FlexAttention's decode counters (lab.results.flex_counters), pre-formatted: each reads
"not measured yet" while its job is not on file, so the same sentence serves both states."""

from __future__ import annotations

import math

from lab.book.facts import Fact
from lab.results import bandwidth
from lab.results import flex_counters as fc

KEYS = {"flex-default": "default", "flex-pad8": "pad8", "flex-pad8-mask": "pad8mask", "flex-paged": "paged", "sdpa-cudnn": "cudnn",
        "fa3": "fa3", "ours-tuned": "ours"}
#: Factor names of lab.results.flex_counters and their short glue names.
FACTORS = {"FA3 over the read floor": "fa3_floor", "useful work over the read floor": "useful",
           "rows computed per real row": "rows", "idle SMs": "idle_sms", "tensor pipe idle": "tensor_idle",
           "vLLM's recipe over the general kernel": "recipe", "instructions": "split_inst",
           "issue rate": "split_issue", "busy SMs": "split_busy", "clock": "split_clock"}


def _text(value, fmt: str, source: str, suffix: str = "") -> Fact:
    ok = value is not None and not (isinstance(value, float) and math.isnan(value))
    return Fact(f"{value:{fmt}}{suffix}" if ok else None, source)


def counter_rows(root=None) -> dict:
    """Per decode job: time, programs, busy SMs, warps per SM, tensor pipe, top stall, DRAM read and its rate."""
    rows = {(r["candidate"], r["batch"]): r for r in fc.table(root)}
    out = {}
    for candidate, batch in fc.ROWS:
        row, key = rows.get((candidate, batch)), f"flexctr_{KEYS[candidate]}_b{batch}"
        src = row["source"] if row else "data/h200/kernel-counters*/raw.csv (lab.results.flex_counters)"
        get = (lambda name: row[name]) if row else (lambda name: None)
        out |= {f"{key}_ms": _text(get("ms"), ".3f", src, " ms"), f"{key}_programs": _text(get("programs"), ",d", src),
                f"{key}_busy": _text(get("busy_sms"), ".0f", src), f"{key}_warps": _text(get("warps_per_sm"), ".0f", src),
                f"{key}_tensor": _text(get("tensor_pct"), ".1f", src, "%"),
                f"{key}_stall": Fact(get("top_stall").replace("_", " ") if row and get("top_stall") else None, src),
                f"{key}_read_gb": _text(get("dram_read_gb"), ".2f", src, " GB"),
                f"{key}_read_pct": _text(get("read_pct_of_ceiling"), ".1f", src, "%")}
    return out


def gap_facts(batch: int, root=None) -> dict:
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


def pad8_facts(root=None) -> dict:
    """The decode template's working programs and what each pulls from DRAM."""
    jobs, src = fc.measured(root), "lab.results.flex_counters over data/h200/kernel-counters*"
    out = {}
    for batch in (1, 16):
        job = jobs.get(("flex-pad8", batch))
        out[f"flexctr_pad8_b{batch}_per_program_gbs"] = _text(fc.per_program_read(job) / 1e9 if job else None, ".0f", src, " GB/s")
    out["flexctr_ceiling_tbs"] = bandwidth.bandwidth_ceiling(fc.GPU, root).to("TB/s").shown_as("{:.2f} TB/s")
    return out


def flex_counters(root=None) -> dict:
    """Every counter fact of chapter 6's FLEX section."""
    return counter_rows(root) | gap_facts(1, root) | gap_facts(16, root) | pad8_facts(root)

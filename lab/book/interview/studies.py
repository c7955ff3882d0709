"""Facts of the studies that landed after the interview chapter was first written and that no page module states
yet: the concurrency sweep and the Flex decomposition and its counters (chapter 6). Chapter 2's DRAM bytes are
its page's facts now (:mod:`lab.book.pages.ch02`).

Each reader goes through the lab.results module that owns its data (
:mod:`lab.results.concurrency`, :mod:`lab.results.flex_decomposition`), so the column names live in one place; a missing
file or point gives a fact that is not measured ("not measured yet" in the chapter), never a guessed number.

    concurrency   data/h200/vllm0.26-qwen2.5-7b-concurrency via lab.results.concurrency, beside the step floor
    decomposition through lab.results.flex_decomposition (its variants, and vLLM's trace windows)

The batch-on-the-roofline facts of the model (where decode turns KV-bound, the floor of a step) divide by the
H200's one bandwidth ceiling (lab.results.bandwidth).
"""

from __future__ import annotations

from lab.book.facts import Fact
from lab.book.interview.common import FA3, FLEX, missing_facts, shown_facts
from lab.results import concurrency as rc
from lab.results import data
from lab.results.bandwidth import bandwidth_ceiling
from lab.results import flex_decomposition as fd
from lab.results import flex_counters as fc

DECOMPOSITION = "h200/flex-decomposition/flex_decomposition.csv"
GB_S = "{:,.0f} GB/s"


# --- batch on the decode roofline -------------------------------------------------------------------

def roofline_batch_facts(root=None) -> dict:
    """Where decode turns KV-bound for Qwen2.5-7B (the model: always there), and the H200 floor of a step (not
    measured while the H200's bandwidth ceiling is not)."""
    kv, weights = rc.kv_bytes_per_step(64, 32768), rc.weight_bytes_per_step()
    values = {"kv_bound_batch_2k": rc.kv_bound_batch(2048), "kv_bound_batch_32k": rc.kv_bound_batch(32768),
              "kv_share_64_32k_pct": 100 * kv / (kv + weights)}
    formats = {"kv_bound_batch_2k": ".0f", "kv_bound_batch_32k": ".1f", "kv_share_64_32k_pct": ".0f"}
    floor = lambda b, n: rc.floor_fact(b, n, "H200-SXM", root).shown_as(MS)
    return shown_facts(values, formats, "lab.results.concurrency (Qwen2.5-7B)") | {
        "floor_gb_s": bandwidth_ceiling("H200-SXM", root).to("GB/s").shown_as(GB_S),
        "floor_h200_1_32k_ms": floor(1, 32768), "floor_h200_64_32k_ms": floor(64, 32768),
        "floor_h200_64_2k_ms": floor(64, 2048)}


MS, TIMES, TOK_S = "{:.1f} ms", "{:.2f}×", "{:,.0f} tokens/s"
CONCURRENCY_FORMATS = {
    **{f"conc_fa3_{label}_{c}{what}": fmt for label, cs in (("32k", (1, 4, 16, 64)), ("2k", (1, 4, 16, 64)))
       for c in cs for what, fmt in (("", MS), ("_floor", MS), ("_x", TIMES), ("_gap", MS))},
    **{f"conc_fa3_{label}_{c}_tok_s": TOK_S for label in ("2k", "32k") for c in (1, 64)},
    "conc_fa3_32k_64_admitted": "{:d}", "conc_fa3_2k_tok_s_gain": "{:.0f}×",
    "conc_flex_2k_1": MS, "conc_flex_2k_64": MS, "conc_flex_32k_1": MS, "conc_flex_32k_top": MS,
    "conc_flex_32k_top_n": "{:d}", "conc_flex_32k_1_x": "{:.0f}×", "conc_flex_32k_top_x": "{:.0f}×",
    "kv_bound_below_32k": "{:d}", "kv_bound_from_32k": "{:d}"}


def _point_values(table, key: str, arm: str, label: str, n: int, c: int) -> dict:
    point = rc.point(table, arm, n, c)
    if point is None:
        return {}
    return {f"conc_{key}_{label}_{c}": point["itl_ms"], f"conc_{key}_{label}_{c}_floor": point["floor_ms"],
            f"conc_{key}_{label}_{c}_x": point["itl_x_floor"], f"conc_{key}_{label}_{c}_gap": point["itl_ms"] - point["floor_ms"],
            f"conc_{key}_{label}_{c}_tok_s": point["decode_tok_s"],
            f"conc_{key}_{label}_{c}_admitted": int(point["admitted"])}


def concurrency_facts(root=None) -> dict:
    """ITL in vLLM on the H200 against concurrent requests (1 to 64) at 2k and 32k, FA3 and FLEX, each beside the
    floor of the batch vLLM admitted; and, at 32k, the measured concurrencies either side of the KV-bound batch."""
    points = rc.load_points(root=data.DATA_DIR if root is None else root)
    ceiling = bandwidth_ceiling("H200-SXM", root)
    # without the ceiling there is no floor to set a point beside: every point reads "not measured yet"
    table = rc.with_floor(points if ceiling.measured else points.iloc[0:0], ceiling.value or 1.0)
    values = {}
    for label, n in (("2k", 2048), ("32k", 32768)):
        for c in (1, 4, 16, 64):
            values |= _point_values(table, "fa3", FA3, label, n, c) | _point_values(table, "flex", FLEX, label, n, c)
    if values.get("conc_fa3_2k_1_tok_s") and values.get("conc_fa3_2k_64_tok_s"):
        values["conc_fa3_2k_tok_s_gain"] = values["conc_fa3_2k_64_tok_s"] / values["conc_fa3_2k_1_tok_s"]
    flex_32k = sorted(int(c) for c in table[(table["arm"] == FLEX) & (table["context"] == 32768)]["concurrency"])
    if flex_32k:  # the FLEX arm may stop early at 32k: its steps take a quarter of a second
        top = _point_values(table, "flex", FLEX, "32k", 32768, flex_32k[-1])
        values |= {"conc_flex_32k_top_n": flex_32k[-1], "conc_flex_32k_top": top.get(f"conc_flex_32k_{flex_32k[-1]}"),
                   "conc_flex_32k_top_x": top.get(f"conc_flex_32k_{flex_32k[-1]}_x")}
    fa3_32k = sorted(int(c) for c in table[(table["arm"] == FA3) & (table["context"] == 32768)]["concurrency"])
    threshold = rc.kv_bound_batch(32768)
    below, above = [c for c in fa3_32k if c <= threshold], [c for c in fa3_32k if c > threshold]
    values |= {"kv_bound_below_32k": below[-1] if below and above else None,
               "kv_bound_from_32k": above[0] if below and above else None}
    source = f"data/{rc.H200_STUDY}/*/concurrency.csv via lab.results.concurrency (floor: weights + admitted × KV)"
    return shown_facts(values, CONCURRENCY_FORMATS, source)


DECOMPOSITION_FORMATS = {"flex_forced_over_default": "{:.2f}×", "flex_tiles16_over_forced": "{:.1f}×",
                         "flex_paged_over_tiles16": "{:.1f}×", "vllm_over_paged": "{:.2f}×",
                         "vllm_over_default": "{:.1f}×", "flex_default_over_cudnn": "{:.0f}×",
                         "flex_pad8_speedup_b16": "{:.1f}×", "flex_prefill_tflops": "{:.0f} TFLOP/s",
                         "flex_prefill_tiles16_x": "{:.0f}×", "flex_prefill_len": "{:,d} tokens"}


def decomposition_facts(root=None) -> dict:
    """Standalone Flex to vLLM's arm, one ingredient at a time (lab.results.flex_decomposition): decode at
    batch 1 as time ratios, vLLM's arm as read-rate ratios (its window is 28k tokens, the rest 32k), the
    decode template at batch 16, and prefill."""
    root = data.DATA_DIR if root is None else root
    dec, vllm = fd.read(root), fd.vllm_flex(root)
    source = f"{fd.DATASET}/{fd.FILE} (lab.results.flex_decomposition) + vLLM's FLEX trace windows"
    if dec is None:
        return missing_facts(DECOMPOSITION_FORMATS, f"data/{source}")
    values = {"vllm_over_paged": fd.vllm_over(dec, vllm), "vllm_over_default": fd.vllm_over(dec, vllm, "flex-default"),
              "flex_prefill_tflops": dec.rate("prefill", 1, "flex-default"), "flex_prefill_len": dec.length("prefill")}
    # the time ratios are the decomposition's own facts, the ones chapters 5b and 6 glue
    steps = {"flex_forced_over_default": ("decode", 1, "flex-forced", "flex-default"),
             "flex_tiles16_over_forced": ("decode", 1, "flex-tiles16", "flex-forced"),
             "flex_paged_over_tiles16": ("decode", 1, "flex-paged", "flex-tiles16"),
             "flex_default_over_cudnn": ("decode", 1, "flex-default", "sdpa-cudnn"),
             "flex_pad8_speedup_b16": ("decode", 16, "flex-default", "flex-pad8"),
             "flex_prefill_tiles16_x": ("prefill", 1, "flex-tiles16", "flex-forced")}
    return (shown_facts(values, {k: DECOMPOSITION_FORMATS[k] for k in values}, f"data/{source}")
            | {name: dec.factor_fact(*step).shown_as(DECOMPOSITION_FORMATS[name]) for name, step in steps.items()})


COUNTER_FORMATS = {"flex_ctr_tensor_pct": "{:.0f}%", "flex_ctr_read_pct": "{:.1f}%", "flex_ctr_rows": "{:.0f}",
                   "flex_ctr_useful": "{:.3f}×", "flex_ctr_pad8_busy": "{:.0f}", "flex_ctr_gap_b1": "{:.0f}×",
                   "flex_ctr_product_b1": "{:.0f}×", "flex_ctr_recipe_b1": "{:.1f}×", "flex_ctr_inst_b1": "{:.1f}×",
                   "flex_ctr_general_b1_ms": "{:.3f} ms", "flex_ctr_template_b1_ms": "{:.3f} ms",
                   "flex_ctr_template_speedup_b1": "{:.0f}×"}


def counter_facts(root=None) -> dict:
    """Why Flex decodes slowly, from the ncu counters (lab.results.flex_counters): the general kernel's tensor pipe
    and DRAM rate at batch 1, the split template's working programs, and the factor chain over FA3."""
    root = data.DATA_DIR if root is None else root
    rows = {(r["candidate"], r["batch"]): r for r in fc.table(root)}
    gap, source = fc.gap(1, root), "data/h200/kernel-counters*/raw.csv via lab.results.flex_counters"
    general, pad8 = rows.get(("flex-default", 1)), rows.get(("flex-pad8", 1))
    template = rows.get(("flex-pad8-mask", 1))  # the decode template handed a block mask with real blocks
    values = {}
    if general and pad8:
        values = {"flex_ctr_tensor_pct": general["tensor_pct"], "flex_ctr_read_pct": general["read_pct_of_ceiling"],
                  "flex_ctr_pad8_busy": pad8["busy_sms"]}
    if general and template:
        values |= {"flex_ctr_general_b1_ms": general["ms"], "flex_ctr_template_b1_ms": template["ms"],
                   "flex_ctr_template_speedup_b1": general["ms"] / template["ms"]}
    if gap:
        values |= {"flex_ctr_rows": gap.factor("rows computed per real row"),
                   "flex_ctr_useful": gap.factor("useful work over the read floor"), "flex_ctr_gap_b1": gap.total_measured,
                   "flex_ctr_product_b1": gap.product, "flex_ctr_recipe_b1": gap.factor("vLLM's recipe over the general kernel"),
                   "flex_ctr_inst_b1": gap.factor("instructions")}
    return shown_facts(values, COUNTER_FORMATS, source)


def facts(root=None) -> dict[str, Fact]:
    """Every later-study fact the interview still reads itself, measured or not."""
    return {**concurrency_facts(root), **roofline_batch_facts(root), **decomposition_facts(root),
            **counter_facts(root)}

"""The interview's H200 figures from this project's runs, as facts glued in their own format.

Each reader returns values (lengths, times, shares, flags), every one "not measured yet" when its data is
missing, so chapter 08 reads correctly either way; the sentences are in the chapter's markdown.
"""

from __future__ import annotations

import re

from lab import LabError
from lab.book.interview.common import FA2, FA3, FLEX, missing_facts, row, shown_facts
from lab.book.pages import ch02
from lab.results import census_windows, data, fused_bound, hardware, iomodel, kernel_runs, sweeps, tuning
from lab.results.bandwidth import bandwidth_ceiling, ceiling, datasheet_bandwidth
from lab.results.modelshape import qwen25_7b

KERNELS = kernel_runs.RECORD  # the kernel benchmark the chapters read
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


# --- kernel benchmark: decode bandwidth shares ------------------------------------------------------

DECODE_NAMES = {"tuned": "ours-tuned", "sdpa": "sdpa-flash", "flex": "flex"}
DECODE_FORMATS = {"h200_dk_len": ",d", "h200_dk_batch_small": "d", "h200_dk_batch_large": "d",
                  **{f"h200_dk_{k}_{b}": ".0f" for k in DECODE_NAMES for b in ("small", "large")}}


def decode_kernel_facts(root=None) -> dict:
    """Share of the H200's bandwidth ceiling each decode kernel reached, at the smallest and largest batch."""
    source = f"data/{KERNELS}/decode.csv"
    path = (data.DATA_DIR if root is None else root) / KERNELS
    if not (path / "decode.csv").exists():
        return missing_facts(DECODE_FORMATS, source)
    table = data.load(path).csv("decode.csv", ["candidate", "batch", "n", "status"])
    table = table[table["status"] == "ok"]
    batches = sorted(set(table["batch"]))
    both = [n for n in sorted(set(table["n"]))
            if all(len(table[(table["candidate"] == c) & (table["batch"] == b) & (table["n"] == n)]) == 1
                   for c in DECODE_NAMES.values() for b in (batches[0], batches[-1]))]
    if not both or len(batches) < 2:
        return missing_facts(DECODE_FORMATS, source)
    n = both[-1]
    f = {"h200_dk_len": int(n), "h200_dk_batch_small": int(batches[0]), "h200_dk_batch_large": int(batches[-1])}
    shares = {f"h200_dk_{key}_{end}": kernel_runs.decode_share(candidate, int(batch), int(n), root).shown_as(".0f")
              for key, candidate in DECODE_NAMES.items() for end, batch in (("small", batches[0]), ("large", batches[-1]))}
    return shown_facts(f, DECODE_FORMATS, source) | shares


# --- tuning: the register cap -----------------------------------------------------------------------

OCCUPANCY_FORMATS = {"h200_occ_tile": "", "h200_occ_warps": "d", "h200_occ_stages": "d", "h200_occ_registers": "d",
                     "h200_occ_programs": "d", "h200_occ_ms": ".2f", "h200_occ_cap": "d",
                     "h200_occ_programs_capped": "d", "h200_occ_ms_capped": ".2f", "h200_occ_speedup": ".2f"}


def occupancy_facts(root=None) -> dict:
    """What a register cap did to the book's Triton forward kernel: one or two programs per multiprocessor."""
    folder = (data.DATA_DIR if root is None else root) / KERNELS
    source = f"data/{KERNELS}/tuning_forward.csv"
    if not (folder / "tuning_forward.csv").exists():
        return missing_facts(OCCUPANCY_FORMATS, source)
    try:
        pairs = tuning.register_cap_pairs(data.load(folder).csv("tuning_forward.csv"))
    except LabError:  # tuning runs from before resources were recorded
        return missing_facts(OCCUPANCY_FORMATS, source)
    best = pairs.loc[pairs.speedup.idxmax()]
    bm, bn, warps, stages = re.fullmatch(r"(\d+)x(\d+) w(\d+) s(\d+)", best.launch).groups()
    f = {"h200_occ_tile": f"{bm}×{bn}", "h200_occ_warps": int(warps), "h200_occ_stages": int(stages),
         "h200_occ_registers": int(best.registers), "h200_occ_programs": int(best.programs_per_sm),
         "h200_occ_ms": float(best.ms), "h200_occ_cap": int(best.cap),
         "h200_occ_programs_capped": int(best.programs_per_sm_capped), "h200_occ_ms_capped": float(best.ms_capped),
         "h200_occ_speedup": float(best.speedup)}
    return shown_facts(f, OCCUPANCY_FORMATS, source)


# --- kernel runs: single blocks against interleaved rounds ------------------------------------------

ROUNDS_FORMATS = {"h200_blocks_min": ".2f", "h200_blocks_max": ".2f", "h200_blocks_runs": "d",
                  "h200_blocks_passing": "d", "h200_rounds_min": ".2f", "h200_rounds_max": ".2f",
                  "h200_rounds_runs": "d"}
ROUNDS_BAR = "prefill 16k: tuned speed vs fastest torch backend"


def rounds_facts(root=None) -> dict:
    """The 16k tuned-vs-cuDNN ratio over runs timed in single blocks and in interleaved rounds."""
    blocks_source = f"data/{kernel_runs.CONTIGUOUS}/*/bars.csv"
    rounds_source = f"data/{kernel_runs.RECORD}/bars.csv, data/{kernel_runs.RECORD_REPEATS}/*/bars.csv"
    try:
        blocks = kernel_runs.stored_runs("h200/kernels-contiguous", root=root)
        rounds = kernel_runs.runs_of_record(root=root)
    except LabError:
        return missing_facts(ROUNDS_FORMATS, f"{blocks_source}; {rounds_source}")
    ratios = lambda runs: [float(ds.csv("bars.csv", ("bar", "ratio")).set_index("bar").ratio[ROUNDS_BAR])
                           for ds in runs.values()]
    b, r = ratios(blocks), ratios(rounds)
    blocks = {"h200_blocks_min": min(b), "h200_blocks_max": max(b), "h200_blocks_runs": len(b),
              "h200_blocks_passing": sum(x >= 0.8 for x in b)}
    rounds = {"h200_rounds_min": min(r), "h200_rounds_max": max(r), "h200_rounds_runs": len(r)}
    formats = lambda part: {k: ROUNDS_FORMATS[k] for k in part}  # noqa: E731
    return shown_facts(blocks, formats(blocks), blocks_source) | shown_facts(rounds, formats(rounds), rounds_source)


# --- the census: matmuls as the control, and the clocks ---------------------------------------------

CONTROL_FORMATS = {"h200_ctl_len": ",d", "h200_ctl_same_launches": "", "h200_ctl_mm_fa3": ",.0f",
                   "h200_ctl_mm_flex": ",.0f", "h200_ctl_apart_pct": ".1f", "h200_ctl_mhz_fa3": ",.0f",
                   "h200_ctl_mhz_flex": ",.0f", "h200_ctl_limit_fa3": "", "h200_ctl_limit_flex": ""}


def control_facts(window: str = "prefill-28672", root=None) -> dict:
    """The matmul control on the H200: same launches or not, the two totals, and the clocks of both windows."""
    root = data.DATA_DIR if root is None else root
    source = f"data/h200/.../traces: census of the {window} windows and their clock samples"
    try:
        launches = census_windows.matmul_launches(root=root, window=window)
    except LabError:  # no capture of that window
        return missing_facts(CONTROL_FORMATS, source)
    clocks = census_windows.window_clocks(root=root)
    launches, clocks = launches[launches.gpu == "H200"], clocks[(clocks.gpu == "H200") & (clocks.window == window)]
    flash, flex = census_windows.BACKENDS
    if launches.empty or set(clocks.backend) != {flash, flex}:
        return missing_facts(CONTROL_FORMATS, source)
    by = clocks.set_index("backend")
    fa, fx = by.loc[flash], by.loc[flex]
    same = bool((launches[f"{flash}: launches"] == launches[f"{flex}: launches"]).all())
    limit = lambda c: c.limit if c.limit != "none" else "no clock limit"
    f = {"h200_ctl_len": int(window.rsplit("-", 1)[1]), "h200_ctl_same_launches": "yes" if same else "no",
         "h200_ctl_mm_fa3": float(fa.matmul_ms), "h200_ctl_mm_flex": float(fx.matmul_ms),
         "h200_ctl_apart_pct": 100 * abs(fa.matmul_ms - fx.matmul_ms) / fa.matmul_ms,
         "h200_ctl_mhz_fa3": float(fa.sm_mhz_median), "h200_ctl_mhz_flex": float(fx.sm_mhz_median),
         "h200_ctl_limit_fa3": limit(fa), "h200_ctl_limit_flex": limit(fx)}
    return shown_facts(f, CONTROL_FORMATS, source)


# --- kernel benchmark: compute-bound prefill, and the ablation steps ---------------------------------

COMPUTE_FORMATS = {"h200_cb_len": ",d", "h200_cb_cudnn_tflops": ".0f", "h200_cb_tuned_tflops": ".0f",
                   "h200_cb_flex_tflops": ".0f", "h200_cb_peak_tflops": ".0f",
                   "h200_cb_ceiling_gbps": ",.0f", "h200_cb_reread_cap_tflops": ".0f", "h200_cb_reread_intensity": ".0f",
                   "h200_cb_compulsory_intensity": ",.0f"}


def compute_bound_facts(root=None) -> dict:
    """Measured prefill TFLOP/s at 16k against what the tile re-read count would allow at the bandwidth ceiling."""
    folder = (data.DATA_DIR if root is None else root) / KERNELS
    source = f"data/{KERNELS}/prefill.csv + lab.results.iomodel + {bandwidth_ceiling('H200-SXM', root).source}"
    if not (folder / "prefill.csv").exists():
        return missing_facts(COMPUTE_FORMATS, source)
    ds = data.load(folder)
    table = ds.csv("prefill.csv", ["candidate", "n", "causal", "status", "tflops"])
    table = table[(table["status"] == "ok") & table["causal"]]
    lengths = set(table[table.candidate == "sdpa-cudnn"]["n"]) & set(table[table.candidate == "ours-tuned"]["n"])
    if not lengths:
        return missing_facts(COMPUTE_FORMATS, source)
    rate = ceiling(ds.gpu, root) / 1e9
    n = min(lengths, key=lambda x: abs(x - 16384))
    shape = qwen25_7b()
    flops = iomodel.prefill_flops(shape, n)["attention"] / shape.layers
    reread = iomodel.attention_hbm_bytes(shape, n, "prefill", "flash", hardware.device("H200-SXM").smem_per_sm,
                                         per="layer")
    f = {"h200_cb_len": int(n), "h200_cb_reread_intensity": flops / reread,
         "h200_cb_compulsory_intensity": flops / iomodel.attention_compulsory_bytes(shape, n, "prefill", per="layer"),
         "h200_cb_reread_cap_tflops": flops / reread * rate * 1e9 / 1e12,
         "h200_cb_cudnn_tflops": float(row(table, candidate="sdpa-cudnn", n=n)["tflops"]),
         "h200_cb_tuned_tflops": float(row(table, candidate="ours-tuned", n=n)["tflops"]),
         "h200_cb_peak_tflops": hardware.device("H200-SXM").bf16_flops / 1e12}
    flex = table[(table.candidate == "flex") & (table.n == n)]
    f["h200_cb_flex_tflops"] = float(flex["tflops"].iloc[0]) if len(flex) == 1 else None
    out = shown_facts(f, COMPUTE_FORMATS, source)
    return out | {"h200_cb_ceiling_gbps": bandwidth_ceiling(ds.gpu, root).to("GB/s").shown_as(",.0f")}


STOPWATCH_FORMATS = {"sw_len": ",d", "sw_kernel": "", "sw_ms": ".1f", "sw_reread_ms": ".1f", "sw_margin_pct": ".0f",
                     "sw_reread_ds_ms": ".1f"}


def stopwatch_facts(n: int = 32768, root=None) -> dict:
    """Chapter 2's stopwatch check (lab.results.fused_bound): the fastest prefill kernel against the time the tile
    re-read count needs at the H200's bandwidth ceiling and at the datasheet's, where the verdict can flip."""
    source = f"data/{KERNELS}/prefill.csv, data/{fused_bound.H200_CEILINGS} via lab.results.fused_bound"
    bandwidths = {"sw_ceiling_tbs": bandwidth_ceiling("H200-SXM", root).to("TB/s").shown_as(".2f"),
                  "sw_ds_tbs": datasheet_bandwidth("H200-SXM").to("TB/s").shown_as(".1f")}
    try:
        check = fused_bound.h200_kernel_check(fused_bound.fastest_candidate(n, root), n, root)
    except LabError:
        return missing_facts(STOPWATCH_FORMATS, source) | bandwidths
    f = {"sw_len": n, "sw_kernel": check["candidate"], "sw_ms": check["ms"], "sw_reread_ms": check["reread_ms"],
         "sw_margin_pct": 100 * (check["reread_ms"] / check["ms"] - 1), "sw_reread_ds_ms": check["reread_ms_datasheet"]}
    return shown_facts(f, STOPWATCH_FORMATS, source) | bandwidths


ABLATION_STEPS = {"exp2": 1, "nomask": 2, "order": 3, "tma": 4, "tuned": 5}
ABLATION_FORMATS = {"h200_abl_len": ",d", "h200_abl_first_tflops": ".0f", "h200_abl_last_tflops": ".0f",
                    **{f"h200_abl_{k}_pct": ".0f" for k in ABLATION_STEPS}}


def ablation_facts(root=None) -> dict:
    """Each step of the kernel ablation at 16k: percent faster than the step before it."""
    folder = (data.DATA_DIR if root is None else root) / KERNELS
    source = f"data/{KERNELS}/ablation.csv"
    if not (folder / "ablation.csv").exists():
        return missing_facts(ABLATION_FORMATS, source)
    table = data.load(folder).csv("ablation.csv", ["n", "step", "ms", "tflops"])
    n = min(set(table["n"]), key=lambda x: abs(x - 16384))
    steps = table[table["n"] == n].set_index("step").sort_index()
    if not set(ABLATION_STEPS.values()) | {0} <= set(steps.index):
        return missing_facts(ABLATION_FORMATS, source)
    f = {"h200_abl_len": int(n), "h200_abl_first_tflops": float(steps.tflops.iloc[0]),
         "h200_abl_last_tflops": float(steps.tflops.loc[max(ABLATION_STEPS.values())])}
    for key, step in ABLATION_STEPS.items():
        f[f"h200_abl_{key}_pct"] = 100 * float(steps.ms.loc[step - 1] / steps.ms.loc[step] - 1)
    return shown_facts(f, ABLATION_FORMATS, source)


def facts() -> dict:
    """Every H200 fact chapters 08 and 09 glue."""
    return {**sweep_facts(), **decode_kernel_facts(), **occupancy_facts(), **rounds_facts(), **control_facts(),
            **compute_bound_facts(), **stopwatch_facts(), **ablation_facts(),
            **ch02.counter_facts()}  # chapter 2's counters, the same facts

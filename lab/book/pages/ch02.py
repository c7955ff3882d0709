"""Chapter 2, the n×n matrix: every fact the chapter states, its figures and its tables.

    glue_all(ch02.facts())          # the one hidden cell
    ch02.passes_table(), ch02.stages_table(), ch02.bytes_figure(), ch02.dram_table(), ch02.prefill_table(),
    ch02.counters_figure(), ch02.bound_times_figure(), ch02.share_figure(), ch02.share_table(), ch02.explorer()

What it reads, each once: the byte model (lab.results.iomodel) and the datasheets (every comparison of GPUs on
paper is drawn on datasheet roofs, so a ratio of two GPUs is a ratio of two datasheet figures); the DRAM bytes
Nsight Compute counted (data/h200/dram-bytes); chapter 1's stopwatch check of the first full benchmark at 32k
(:func:`lab.book.pages.ch01.prefill_check`); the Nsight Compute counters of the fused prefill kernels at 16k
(data/h200/kernel-counters); the value-dependence run (data/h200/value-dependence), the one run that recorded the
clock a large matmul ran at; the A10G study's fits and quadratic shares.

The counters were ``lab.book.counter_facts``; the names other pages take from it live here: :data:`N`,
:data:`KERNELS`, :data:`FOLDER`, :func:`prefill_rows`, :func:`prefill_table` and :func:`counter_facts` (the
``kc_*`` glue names the interview page and the course kit state). Other glue names they may take: ``weights_gb``
(from chapter 1), ``chk_*`` (the stopwatch check), ``t_*`` and ``bw_ratio_datasheet``.
"""

from __future__ import annotations

import functools

import pandas as pd

from lab.book.facts import Fact
from lab.book.pages import ch01
from lab.book.plots.counters import plot_prefill_counters
from lab.book.plots.iomodel import plot_attention_share, plot_bound_times, plot_bytes_and_footprint
from lab.book.roofline_explorers import attention_bytes_explorer
from lab.names import label
from lab.results import bandwidth, data, dram_bytes, fused_bound, iomodel, kernel_counters, reference, roofline
from lab.results import value_dependence
from lab.results.facts import NOT_MEASURED
from lab.results.hardware import DEVICES, GB
from lab.results.kernel_counters import CLOCK, MAIN_MS, TENSOR_BUSY, WARPS_PER_SM, counter_fact
from lab.results.modelshape import qwen25_7b
from lab.results.quantities import Quantity

MODEL = qwen25_7b()
D = MODEL.head_dim
H100, H200, A10G = DEVICES["H100-SXM"], DEVICES["H200-SXM"], DEVICES["A10G"]
GPUS = (("a10g", A10G), ("h100", H100), ("h200", H200))
LENGTHS = [256 * 2**i for i in range(10)]
SHAPE = "lab.results.modelshape: Qwen2.5-7B config.json"
PASSES_N, STAGES_N, BIG_N, TIMES_N, DECODE_N, CHUNK_N = 1024, 8192, 32768, 16384, 32768, 32768
DRAM_LENGTHS, DRAM_KERNELS = (4096, 16384, 32768), ("ours-tuned", "sdpa-flash", "sdpa-cudnn")
A10G_STUDY = reference.DATASET

#: Where a number computed from the shape and the datasheets (no data/ file) comes from.
MODELLED = "lab.results.iomodel and lab.results.roofline: Qwen2.5-7B's shape, datasheet figures"

# --- the counters (what was lab.book.counter_facts) ------------------------------------------------------

N = 16384
#: The prefill jobs chapter 2 compares, fastest peers first (each named by lab.names).
KERNELS = ("sdpa-cudnn", "fa3", "fa4", "flex-flash", "ours-tuned", "flex")
FOLDER = f"data/{kernel_counters.RUNS[0]}"
COLUMNS = {"kernel": "kernel", "ms": "main kernel (ms)", "tensor_pct": "tensor pipe busy", "xu_pct": "XU pipe",
           "warps_per_sm": "warps per SM", "top_stall": "top stall", "read_over_compulsory": "DRAM reads / compulsory",
           "rate_pct": "DRAM rate, % of ceiling"}
_MAIN = ("the main (longest) kernel of one causal prefill call at 16k, batch 1, 28/4 heads, d=128, bf16, under Nsight "
         "Compute: ")
_COUNTERS = dict(run=kernel_counters.RUNS[0], file="raw.csv")
XU_BUSY = Quantity("h200.counters.xu_busy", _MAIN + "XU-pipe (exponentials) instructions as a share of its peak over "
                   "the active cycles", unit="%", **_COUNTERS)
BARRIER_STALL = Quantity("h200.counters.barrier_stall", _MAIN + "cycles its warps stalled at a barrier per issued "
                         "instruction", unit="cycles", **_COUNTERS)
READS_OVER_COMPULSORY = Quantity("h200.counters.reads_over_compulsory", "DRAM bytes one causal prefill call read (all "
                                 "its kernels) over Q, K and V read once", unit="×", **_COUNTERS)
DRAM_RATE = Quantity("h200.counters.dram_rate_pct", "one prefill call's DRAM bytes (read and written) per second as a "
                     "share of the H200's bandwidth ceiling", unit="%", **_COUNTERS)
SPAN = Quantity("h200.counters.span", "the lowest or highest of one counter over the fused prefill kernels of "
                "chapter 2 at 16k", **_COUNTERS)
ATTENTION_RATE = Quantity("h200.counters.attention_tflops", _MAIN + "causal attention's FLOPs (4·d per kept "
                          "query-key pair and head) over its duration", unit="TFLOP/s", **_COUNTERS)
PER_GHZ = Quantity("h200.counters.tflops_per_ghz", _MAIN + "its FLOP/s over the clock it ran at", unit="TFLOP/s per GHz",
                   **_COUNTERS)

# --- the other quantities chapter 2 teaches ------------------------------------------------------------

_VALUES = dict(run=value_dependence.DATASET, file=value_dependence.FILE)
VD_RATE = Quantity("h200.value_dependence.tflops", "an 8192³ bf16 torch.matmul's FLOP/s in the value-dependence run "
                   "(do_bench median, one input kind)", unit="TFLOP/s", **_VALUES)
VD_CLOCK = Quantity("h200.value_dependence.sm_mhz", "the median SM clock nvidia-smi reported while one operation was "
                    "timed on one input kind in the value-dependence run", unit="MHz", **_VALUES)
VD_POWER = Quantity("h200.value_dependence.power_w", "the median power nvidia-smi reported meanwhile", unit="W",
                    **_VALUES)
VD_PER_GHZ = Quantity("h200.value_dependence.tflops_per_ghz", "the 8192³ matmul's FLOP/s over its clock, random "
                      "inputs", unit="TFLOP/s per GHz", **_VALUES)
DRAM_MEASURED = Quantity("h200.dram_bytes.measured", "DRAM bytes (read and written) Nsight Compute counted for one "
                         "causal prefill call of one layer", run="h200/dram-bytes", unit="GB")
FIT_C = Quantity("a10g.fit.c", "the quadratic coefficient c of the A10G study's fit t = a + b·n + c·n² to one arm's "
                 "time to first token", run=A10G_STUDY, file="fits.csv", unit="ps per token²")
QUAD_SHARE = Quantity("a10g.fit.quadratic_share", "the share c·n² / (b·n + c·n²) of one arm's fitted time to first "
                      "token at n tokens, as the study published it", run=A10G_STUDY, file="quad_share.csv", unit="%")
IMPLIED = Quantity("a10g.fit.implied_tflops", "the model's FLOPs over one fitted term: the linear term's for the "
                   "matmuls, the quadratic term's for attention", run=A10G_STUDY, file="fits.csv", unit="TFLOP/s")
FIT_GAP = Quantity("a10g.fit.flash_share_gap", "the largest gap between FlashAttention's fitted quadratic share and "
                   "the FLOP model's attention share over the published lengths", run=A10G_STUDY,
                   file="quad_share.csv", unit="percentage points")
FLEX_SLOWER = Quantity("a10g.fit.flash_over_flex_attention_rate", "FlashAttention's implied attention FLOP/s over "
                       "FlexAttention's, from the two arms' fitted quadratic terms", run=A10G_STUDY, file="fits.csv",
                       unit="×")
STUDY = Quantity("a10g.study.setting", "a setting of the A10G study: its longest prompt, its prompt lengths per arm, "
                 "its prefill chunk", run=A10G_STUDY, file="sweep.csv")
FIT_MARGIN = Quantity("a10g.fit.below_reread_floor", "how far FlashAttention's fitted c sits below the least c the tile "
                      "re-read count allows at the A10G's bandwidth", run=A10G_STUDY, file="fits.csv", unit="%")
CHUNK_QUAD = Quantity("a10g.fit.quadratic_seconds", "the fitted quadratic term c·n² of FlashAttention's time to first "
                      "token at n tokens", run=A10G_STUDY, file="fits.csv", unit="s")
REREAD_MARGIN = Quantity("h200.prefill.below_reread_floor", "how far the re-read count's time at the bandwidth ceiling "
                         "lies above the kernel's measured time", run=ch01.RECORD, file="prefill.csv", unit="%")


# --- the counters: rows, table, facts ----------------------------------------------------------------------

def _row(candidate: str, job, ceiling: float) -> dict:
    """One kernel's counters; every value None when the job is not on file."""
    row = {"candidate": candidate, "kernel": label(candidate), "job": job}
    if job is None:
        return row | {key: None for key in COLUMNS if key != "kernel"} | {
            "dram_read": None, "compulsory_read": None, "barrier": None, "clock_ghz": None, "tflops": None}
    compulsory = kernel_counters.compulsory_read_bytes(job)
    flops = iomodel.attention_flops(job.n, job.n, 28, 128, causal=True, batch=job.batch)
    return row | {"ms": job.main["ms"], "tensor_pct": job.main["tensor_pct"], "xu_pct": job.main["xu_pct"],
                  "warps_per_sm": job.main["warps_per_sm"], "top_stall": job.stalls[0][0] if job.stalls else None,
                  "barrier": dict(job.stalls).get("barrier"), "dram_read": job.totals["dram_read"],
                  "compulsory_read": compulsory, "read_over_compulsory": job.totals["dram_read"] / compulsory,
                  "rate_pct": 100 * job.dram_rate / ceiling, "clock_ghz": job.main.get("clock_hz", float("nan")) / 1e9,
                  "tflops": flops / (job.main["ms"] * 1e-3) / 1e12}


def prefill_rows(root=None) -> list[dict]:
    """One row per kernel of :data:`KERNELS` at :data:`N` tokens (batch 1): main-kernel ms, tensor and XU pipe
    busy (% of peak over the active cycles), warps resident per SM, the top stall reason (and the barrier stall,
    cycles per issued instruction), DRAM bytes read against Q, K and V read once, the job's DRAM traffic per
    second as a percentage of the GPU's read ceiling, the clock and attention's FLOP/s. ``root``: the data folder
    (tests pass their own)."""
    jobs = kernel_counters.jobs(root)
    ceiling = bandwidth.ceiling("NVIDIA H200", root) if jobs else None  # no job: nothing to divide
    return [_row(candidate, jobs.get(f"prefill:{candidate}:1:{N}"), ceiling) for candidate in KERNELS]


def prefill_table(rows: list[dict] | None = None):
    """Chapter 2's table of the counters, "not measured yet" where a kernel is missing."""
    table = pd.DataFrame(rows if rows is not None else _rows())[list(COLUMNS)].rename(columns=COLUMNS)
    formats = {"main kernel (ms)": "{:.2f}", "tensor pipe busy": "{:.1f}%", "XU pipe": "{:.1f}%",
               "warps per SM": "{:.0f}", "DRAM reads / compulsory": "{:.2f}×", "DRAM rate, % of ceiling": "{:.1f}%"}
    return table.style.hide(axis="index").format(formats, na_rep=NOT_MEASURED)


def _span(rows: list[dict], key: str) -> tuple:
    values = [row[key] for row in rows if row[key] is not None]
    return (min(values), max(values)) if values else (None, None)


def _job_fact(quantity: Quantity, row: dict, key: str, fmt: str) -> Fact:
    """A counter of one kernel's row as its quantity (not measured when the job is not on file)."""
    if row["job"] is None:
        return quantity.fact(None, row["candidate"], f"{N // 1024}k", fmt=fmt)
    return counter_fact(quantity, row[key], row["job"], fmt=fmt)


def counter_facts(rows: list[dict] | None = None) -> dict[str, Fact]:
    """The counters the prose quotes (the ``kc_*`` names the interview page and the course kit take), each glued
    with its unit so a missing kernel reads "not measured yet": the range over all kernels, and each kernel's own."""
    rows = rows if rows is not None else _rows()
    by = {row["candidate"]: row for row in rows}
    out = {"kc_n": Fact(N, "lab.book.pages.ch02.N")}
    for key, fmt in (("tensor_pct", "{:.0f}%"), ("xu_pct", "{:.0f}%"), ("read_over_compulsory", "{:.1f}×"),
                     ("rate_pct", "{:.1f}%")):
        low, high = _span(rows, key)
        out[f"kc_{key}_min"] = SPAN.fact(low, key, "lowest", fmt=fmt)
        out[f"kc_{key}_max"] = SPAN.fact(high, key, "highest", fmt=fmt)
    for tag, candidate in (("fa3", "fa3"), ("ours", "ours-tuned"), ("fa4", "fa4"), ("cudnn", "sdpa-cudnn")):
        row = by[candidate]
        out |= {f"kc_{tag}_ms": _job_fact(MAIN_MS, row, "ms", "{:.2f} ms"),
                f"kc_{tag}_tensor": _job_fact(TENSOR_BUSY, row, "tensor_pct", "{:.1f}%"),
                f"kc_{tag}_xu": _job_fact(XU_BUSY, row, "xu_pct", "{:.1f}%"),
                f"kc_{tag}_warps": _job_fact(WARPS_PER_SM, row, "warps_per_sm", "{:.0f}"),
                f"kc_{tag}_stall": Fact(row["top_stall"], FOLDER + "/raw.csv"),
                f"kc_{tag}_barrier": _job_fact(BARRIER_STALL, row, "barrier", "{:.2f}"),
                f"kc_{tag}_reads": _job_fact(READS_OVER_COMPULSORY, row, "read_over_compulsory", "{:.1f}×")}
    return out


@functools.cache
def _rows() -> list[dict]:
    return prefill_rows()


def _clock_facts() -> dict:
    """Attention's main kernels against the matmul rate of chapter 1: FLOP/s, clocks, FLOP/s per clock."""
    by = {row["candidate"]: row for row in _rows()}
    out = {}
    for tag, candidate in (("fa3", "fa3"), ("fa4", "fa4")):
        row = by[candidate]
        out |= {f"kc_{tag}_tflops": _job_fact(ATTENTION_RATE, row, "tflops", "{:.0f} TFLOP/s"),
                f"kc_{tag}_clock": _job_fact(CLOCK, row, "clock_ghz", "{:.2f} GHz"),
                f"kc_{tag}_per_ghz": (PER_GHZ.fact(row["tflops"] / row["clock_ghz"], candidate, f"{N // 1024}k",
                                                   fmt="{:.0f}") if row["job"] else PER_GHZ.fact(None, candidate))}
    values = value_dependence.read()
    matmul = values.get("matmul-8192", "random") if values else None
    zeros = values.get("matmul-8192", "zeros") if values else None
    ours = values.get("ours-tuned-16k", "random") if values else None
    rate = 2 * 8192**3 / (matmul.ms * 1e-3) / 1e12 if matmul else None
    out |= {"vd_matmul_tf": VD_RATE.fact(rate, "matmul-8192", "random", fmt="{:.0f}"),
            "vd_matmul_mhz": VD_CLOCK.fact(matmul.sm_mhz if matmul else None, "matmul-8192", "random", fmt="{:,.0f}"),
            "vd_matmul_w": VD_POWER.fact(matmul.power_w if matmul else None, "matmul-8192", "random", fmt="{:.0f}"),
            "vd_matmul_limit": Fact(matmul.clock_limit if matmul else None, f"data/{value_dependence.DATASET}"),
            "vd_zeros_mhz": VD_CLOCK.fact(zeros.sm_mhz if zeros else None, "matmul-8192", "zeros", fmt="{:,.0f}"),
            "vd_ours_mhz": VD_CLOCK.fact(ours.sm_mhz if ours else None, "ours-tuned-16k", "random", fmt="{:,.0f}"),
            "vd_ours_w": VD_POWER.fact(ours.power_w if ours else None, "ours-tuned-16k", "random", fmt="{:.0f}"),
            "vd_matmul_per_ghz": VD_PER_GHZ.fact(rate / (matmul.sm_mhz / 1e3) if matmul else None, fmt="{:.0f}")}
    return out


# --- the byte model ------------------------------------------------------------------------------------------

def _passes() -> pd.DataFrame:
    passes = pd.DataFrame(iomodel.naive_attention_passes(PASSES_N, PASSES_N, D, 2))
    passes["total"] = passes["read"] + passes["written"]
    return passes


def passes_table():
    """Standard attention's three passes over HBM for one head at PASSES_N tokens, bf16."""
    return (_passes().rename(columns={"stage": "pass", "read": "bytes read", "written": "bytes written", "total": "bytes"})
            .style.hide(axis="index").format("{:,}", subset=["bytes read", "bytes written", "bytes"]))


def _stages():
    return roofline.attention_stages(STAGES_N, STAGES_N, D)


def stages_table():
    """The three stages of one head at STAGES_N tokens on the H100's datasheet roof."""
    roof = roofline.datasheet_roof(H100)
    rows = [{"stage": s.name, "GFLOP": s.flops / 1e9, "MB moved": s.bytes / 1e6, "FLOP/byte": s.intensity,
             "bound": s.bound(roof), "bound time (µs)": 1e6 * s.time(roof)} for s in _stages()]
    return pd.DataFrame(rows).style.hide(axis="index").format(
        {"GFLOP": "{:.2f}", "MB moved": "{:,.0f}", "FLOP/byte": "{:.3g}", "bound time (µs)": "{:,.1f}"})


def _model_facts() -> dict:
    total = int(_passes()["total"].sum())
    stages, roof = _stages(), roofline.datasheet_roof(H100)
    softmax = stages[1]
    time_total = sum(s.time(roof) for s in stages)
    return {"heads": MODEL.q_heads, "kv_heads": MODEL.kv_heads, "layers": MODEL.layers, "head_dim": D,
            "group": MODEL.q_heads // MODEL.kv_heads,
            "ex_n": PASSES_N, "ex_total_mb": total / 1e6, "ex_s_mb": PASSES_N**2 * 2 / 1e6,
            "ex_qkvo_mb": 4 * PASSES_N * D * 2 / 1e6, "ex_nn_pct": 100 * 4 * PASSES_N**2 * 2 / total,
            "st_n": STAGES_N, "sm_flop_pct": 100 * softmax.flops / sum(s.flops for s in stages),
            "sm_time_pct": 100 * softmax.time(roof) / time_total, "sm_ai": softmax.intensity,
            "qk_ai": stages[0].intensity, "h100_ridge_datasheet": roofline.datasheet_ridge("H100-SXM"),
            "sm_us": 1e6 * softmax.time(roof),
            # the softmax runs on the CUDA cores (fp32) and the exponential unit, not the tensor cores
            "sm_compute_us": 1e6 * softmax.flops / H100.fp32_flops,
            "h100_fp32_ridge": H100.fp32_flops / H100.bandwidth}


def _footprint_facts() -> dict:
    naive = iomodel.attention_hbm_bytes(MODEL, BIG_N, "prefill", "naive", H200.smem_per_sm, per="layer")
    flash = iomodel.attention_hbm_bytes(MODEL, BIG_N, "prefill", "flash", H200.smem_per_sm, per="layer")
    floor = iomodel.attention_compulsory_bytes(MODEL, BIG_N, "prefill", per="layer")
    return {"big_n": BIG_N, "big_naive_gb": naive / GB, "big_flash_gb": flash / GB, "big_floor_gb": floor / GB,
            "big_ratio": naive / flash, "big_span": flash / floor,
            "big_sp_gb": iomodel.naive_intermediate_bytes(MODEL, BIG_N) / GB,
            "block_h200": iomodel.flash_block_size(D, H200.smem_per_sm, 2), "smem_h200_kib": H200.smem_per_sm / 1024,
            "weights_gb": ch01.facts()["weights_gb"],
            **{f"fit_{key}": iomodel.max_naive_length(MODEL, dev.memory_bytes) for key, dev in GPUS},
            **{f"mem_{key}": dev.memory_bytes / GB for key, dev in GPUS}}


def bytes_figure():
    """Naive against fused as the prompt grows: bytes per layer, and the memory the score matrix occupies."""
    return plot_bytes_and_footprint(MODEL, LENGTHS, H200, [A10G, H100, H200], measured=dram_bytes.load(),
                                    source="Model: Qwen2.5-7B shape, bf16; tiles sized from the H200's shared memory "
                                           "(lab.results.iomodel). Diamonds, when present: Nsight Compute on the H200.")


def dram_table():
    """Compulsory, measured and re-read bytes of the fused kernels on the H200, with the L2 hit rate."""
    measured, rows = dram_bytes.load(), []
    for n in DRAM_LENGTHS:
        counts = iomodel.prefill_byte_counts(n, MODEL.q_heads, MODEL.kv_heads, D, iomodel.flash_block_size(D, H200.smem_per_sm, 2))
        for candidate in DRAM_KERNELS:
            hit = dram_bytes.row(measured, candidate, n)
            rows.append({"tokens": n, "kernel": candidate, "compulsory (GB)": counts["compulsory"] / GB,
                         "measured DRAM bytes (GB)": hit["measured_bytes"] / GB if hit is not None else None,
                         "L2 hit rate": hit["l2_hit_pct"] if hit is not None else None,
                         "every re-read (GB)": counts["reread"] / GB})
    return pd.DataFrame(rows).style.hide(axis="index").format(
        {"tokens": "{:,}", "compulsory (GB)": "{:.3f}", "measured DRAM bytes (GB)": "{:.3g}", "L2 hit rate": "{:.0f}%",
         "every re-read (GB)": "{:.1f}"}, na_rep=NOT_MEASURED)


def _dram_facts() -> dict:
    short = dram_bytes.row(dram_bytes.load(), "sdpa-cudnn", 4096)
    return {**dram_bytes.facts("ours-tuned", 32768, prefix="dram32k"),
            "o_4k_mb": 4096 * MODEL.q_heads * D * 2 / 1e6, "h200_l2_mb": H200.l2_bytes / 2**20,
            "short_measured_gb": DRAM_MEASURED.fact(short["measured_bytes"] / GB if short is not None else None,
                                                    "sdpa-cudnn", 4096)}


def _stopwatch_facts() -> dict:
    check = ch01.prefill_check(BIG_N)
    raw = check["check"]
    fit = fused_bound.a10g_fit_check(MODEL)
    return {"chk_kernel": check["kernel"], "chk_n": BIG_N, "chk_ms": check["ms"],
            "chk_reread_ms": Fact(raw["reread_ms"], "lab.results.iomodel at the H200's bandwidth ceiling"),
            "chk_compute_ms": check["compute_ms"], "chk_pct": check["pct"], "chk_rate": check["rate"],
            "chk_margin_pct": REREAD_MARGIN.fact(100 * (raw["reread_ms"] / raw["ms"] - 1), raw["candidate"], BIG_N),
            "chk_ceiling_tbs": bandwidth.bandwidth_ceiling(H200).to("TB/s"),
            "chk_reread_ds_ms": Fact(raw["reread_ms_datasheet"], "lab.results.iomodel at the datasheet bandwidth"),
            "chk_ds_tbs": bandwidth.datasheet_bandwidth(H200).to("TB/s"),
            "matmul_rate_tf": ch01.facts()["matmul_rate_tf"], "matmul_8192_tf": ch01.facts()["matmul_8192_tf"],
            "fit_margin_pct": FIT_MARGIN.fact(100 * (1 - fit["fitted"]["FLASH_ATTN"] / fit["reread"]), "FLASH_ATTN"),
            "fit_c": FIT_C.fact(1e12 * fit["fitted"]["FLASH_ATTN"], "FLASH_ATTN"),
            "fit_reread": 1e12 * fit["reread"], "fit_compute": 1e12 * fit["compute"], "fit_block": fit["block"]}


# --- bound times: every GPU on its datasheet roof ------------------------------------------------------------

def bound_times_figure():
    """The least time one prefill's attention can take on each GPU, naive against fused, on datasheet roofs."""
    return plot_bound_times(MODEL, LENGTHS, [A10G, H100, H200], roof_of=roofline.datasheet_roof,
                            source="Model: datasheet peaks and datasheet bandwidths (lab.results.roofline.datasheet_roof), "
                                   "Qwen2.5-7B shape, bf16, causal.")


def _time_facts() -> dict:
    times = {"t_n": TIMES_N}
    for key, dev in GPUS:
        roof = roofline.datasheet_roof(dev)
        naive = roofline.model_phase(MODEL, "prefill", TIMES_N, fused=False, sram_bytes=dev.smem_per_sm)["attention"]
        flash = roofline.model_phase(MODEL, "prefill", TIMES_N, fused=True, sram_bytes=dev.smem_per_sm)["attention"]
        floor = roofline.Kernel("flash, compulsory", flash.flops, iomodel.attention_compulsory_bytes(MODEL, TIMES_N, "prefill"))
        times |= {f"t_naive_{key}": naive.time(roof), f"t_flash_{key}": floor.time(roof), f"t_reread_{key}": flash.time(roof)}
    ratio = Fact(H200.bandwidth / H100.bandwidth, "datasheet: lab.results.hardware (H200 over H100)")
    return times | {"bw_ratio_datasheet": ratio, "h100_tbs": bandwidth.datasheet_bandwidth(H100).to("TB/s"),
                    "h200_tbs": bandwidth.datasheet_bandwidth(H200).to("TB/s")}


def _decode_facts() -> dict:
    naive = iomodel.attention_hbm_bytes(MODEL, DECODE_N, "decode", "naive", H100.smem_per_sm)
    flash = iomodel.attention_hbm_bytes(MODEL, DECODE_N, "decode", "flash", H100.smem_per_sm)
    return {"dec_n": DECODE_N, "dec_naive_gb": naive / GB, "dec_flash_gb": flash / GB,
            "dec_extra_pct": 100 * (naive / flash - 1), "kv_kb": MODEL.kv_bytes_per_token() / 1024}


# --- attention's share of a prefill (the A10G study) ---------------------------------------------------------

@functools.cache
def _study():
    ref = data.load(A10G_STUDY)
    fits = ref.csv("fits.csv", ["arm", "a_s", "b_us_per_token", "c_ps_per_token2"]).set_index("arm")
    quad = ref.csv("quad_share.csv", ["arm", "n", "share_pct"])
    sweep = ref.csv("sweep.csv", ["actual_len", "arm"])
    return ref, fits, quad, sweep


def _shares() -> pd.DataFrame:
    _, fits, quad, _ = _study()
    rows = []
    for n in sorted(set(quad["n"])):
        row = {"prompt tokens": n, "model: attention share of FLOPs (%)": 100 * iomodel.attention_flop_share(MODEL, n)}
        for arm in fits.index:
            row[f"{arm}: fitted quadratic share (%)"] = float(quad[(quad.arm == arm) & (quad.n == n)]["share_pct"].iloc[0])
        rows.append(row)
    return pd.DataFrame(rows)


def share_table():
    """The FLOP model's attention share beside the study's fitted quadratic shares."""
    return _shares().style.hide(axis="index").format(precision=1, thousands=",")


def share_figure():
    """Attention's share of prefill FLOPs against length, with the study's quadratic shares as points."""
    _, _, quad, _ = _study()
    published = {arm: list(zip(g["n"], g["share_pct"], strict=True)) for arm, g in quad.groupby("arm")}
    return plot_attention_share(MODEL, LENGTHS, published, source="Model: Qwen2.5-7B FLOPs (lab.results.iomodel). Points: "
                                "published A10G study, vLLM 0.11 (data/reference).")


def _share_facts() -> dict:
    ref, fits, _, sweep = _study()
    shares = _shares()
    model_col, fa_col, flex_col = (shares.columns[1], "FLASH_ATTN: fitted quadratic share (%)",
                                   "FLEX_ATTENTION: fitted quadratic share (%)")
    facts = {"cross_n": iomodel.crossover_length(MODEL), "w_layer_m": MODEL.linear_weights_per_layer / 1e6}
    for row in shares.itertuples(index=False):
        n = int(row[0])
        facts |= {f"model_share_{n}": float(row[1]),
                  f"fa_share_{n}": QUAD_SHARE.fact(float(row[2]), "FLASH_ATTN", n),
                  f"flex_share_{n}": QUAD_SHARE.fact(float(row[3]), "FLEX_ATTENTION", n)}
    implied = {arm: iomodel.implied_throughputs(MODEL, fits.loc[arm, "b_us_per_token"] * 1e-6,
                                                fits.loc[arm, "c_ps_per_token2"] * 1e-12) for arm in fits.index}
    facts |= {"fa_gap": FIT_GAP.fact(float((shares[model_col] - shares[fa_col]).abs().max())),
              "longest_measured": STUDY.fact(int(sweep["actual_len"].max()), "longest prompt"),
              "share_longest_n": STUDY.fact(int(shares.iloc[-1, 0]), "longest published quadratic share"),
              "n_points": STUDY.fact(int(len(sweep) // sweep["arm"].nunique()), "prompt lengths per arm"),
              "fa_flex_ratio": FLEX_SLOWER.fact(float(implied["FLASH_ATTN"]["attention_flops"] /
                                                      implied["FLEX_ATTENTION"]["attention_flops"])),
              "a10g_peak_tf": A10G.bf16_flops / 1e12}
    for arm, tag in (("FLASH_ATTN", "fa"), ("FLEX_ATTENTION", "flex")):
        facts |= {f"{tag}_lin_tf": IMPLIED.fact(float(implied[arm]["linear_flops"]) / 1e12, arm, "matmuls"),
                  f"{tag}_att_tf": IMPLIED.fact(float(implied[arm]["attention_flops"]) / 1e12, arm, "attention")}
    chunk = int(ref.provenance["flags"]["max_num_batched_tokens"])
    block = iomodel.flash_block_size(D, A10G.smem_per_sm, 2)
    chunked = iomodel.chunked_prefill_bytes(MODEL, CHUNK_N, chunk, block)
    extra = MODEL.layers * (chunked["chunked"]["compulsory"] - chunked["single"]["compulsory"])
    quad_s = float(fits.loc["FLASH_ATTN", "c_ps_per_token2"]) * 1e-12 * CHUNK_N**2
    return facts | {"chunk": STUDY.fact(chunk, "prefill chunk"), "chunk_n": CHUNK_N, "chunk_count": -(-CHUNK_N // chunk),
                    "chunk_extra_gb": extra / GB, "chunk_extra_ms": 1e3 * extra / A10G.bandwidth,
                    "chunk_single_gb": MODEL.layers * chunked["single"]["compulsory"] / GB,
                    "chunk_reread_gb": MODEL.layers * chunked["single"]["reread"] / GB,
                    "quad_s": CHUNK_QUAD.fact(quad_s, "FLASH_ATTN", CHUNK_N)}


@functools.cache
def facts() -> dict[str, Fact]:
    """Every fact chapter 2 states, by glue name."""
    found = (_model_facts() | _footprint_facts() | _dram_facts() | _stopwatch_facts() | counter_facts()
            | _clock_facts() | _time_facts() | _decode_facts() | _share_facts())
    return {key: value if isinstance(value, Fact) else Fact(value, MODELLED) for key, value in found.items()}


def counters_figure():
    """What the fused prefill kernels kept busy on the H200: the tensor pipe, the XU pipe, and DRAM."""
    return plot_prefill_counters(_rows(), source=f"Nsight Compute on one H200: each job's main kernel, one layer of "
                                 f"Qwen2.5-7B's causal attention, bf16, {N:,} tokens, batch 1 ({FOLDER}).")


def explorer():
    """One layer's HBM traffic, naive and fused, and the roofline's bound, by length, GPU and dtype."""
    return attention_bytes_explorer()

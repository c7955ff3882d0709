"""Chapter 1, arithmetic intensity and the roofline: every fact the chapter states, its figures and its tables.

    glue_all(ch01.facts())          # the one hidden cell
    ch01.spec_table(), ch01.sources_table(), ch01.serving_figure(), ch01.explorer(), ch01.this_machine_figure()

What it reads, each once: the datasheets of lab.results.hardware (every comparison of GPUs *on paper* is drawn
on datasheet roofs, :func:`lab.results.roofline.datasheet_roof`: datasheet peak over datasheet bandwidth); the
H200's measured matmul rate (data/h200/hardware) and its measured read-stream bandwidth ceiling
(data/h200/bandwidth) and their ratio, the *measured* ridge; the first full kernel benchmark (data/h200/kernels)
for the overhead regime; the A10G study's sweep for its shortest decode. The machine that builds the page is
measured live.

Glue names other pages may take from here (the interview page, the course kit): ``h100_ridge_datasheet``,
``h200_ridge_datasheet`` (for comparisons with papers only), ``h200_ridge_measured`` (for everything measured on
the H200), ``matmul_rate_tf`` (what the H200's matmul measurement is: ``matmul_*``), ``h200_ceiling``,
``weights_gb`` (what Qwen2.5-7B's weights occupy) and ``weights_streamed_gb`` (what one decode step reads of
them), ``h100_tflops``, ``h100_tbs``, ``h200_tbs``.
"""

from __future__ import annotations

import functools

from lab import env
from lab.book.facts import Fact
from lab.book.link_table import LinkTable
from lab.book.plots import figure
from lab.book.plots.roofline import plot_roofline
from lab.book.roofline_explorers import roofline_explorer
from lab.measure.ceilings import GPU_SIZES
from lab.names import label
from lab.results import bandwidth, data, fused_bound, hardware, iomodel, reference, roofline, sweeps, units
from lab.results.hardware import DEVICES, GB, TB, TFLOPS
from lab.results.kernel_runs import PREFILL_MS, RECORD
from lab.results.modelshape import qwen25_7b, streamed_weights_gb, weights_gb
from lab.results.quantities import Quantity

MODEL = qwen25_7b()
H100, H200, A10G = DEVICES["H100-SXM"], DEVICES["H200-SXM"], DEVICES["A10G"]
DATASHEET = "datasheet: lab.results.hardware"
SQUARE_N = 4096                 # the worked square product
FIGURE_N = 8192                 # the prompt length the serving kernels are placed at
OVERHEAD_N, LONG_N = 1024, 32768  # the short and the long prompt of the overhead regime

#: Where a number computed from the shape and the datasheets (no data/ file) comes from.
MODELLED = "lab.results.roofline and lab.results.iomodel: Qwen2.5-7B's shape, datasheet figures"

# --- the quantities chapter 1 teaches -------------------------------------------------------------------

MATMUL_PCT = Quantity("h200.matmul_rate.pct_of_datasheet", "the H200's measured matmul rate over its datasheet "
                      "dense bf16 peak", run=roofline.MATMUL_RUN, file="measurements.json", unit="%")
MATMUL_RUNS = Quantity("h200.matmul_rate.setting", "how the H200's matmul rate was measured: the size n of the "
                       "fastest n×n×n product, the calls timed per size, and each size's rate",
                       run=roofline.MATMUL_RUN, file="measurements.json")
COMPUTE_FLOOR = Quantity("h200.prefill.compute_floor", "one layer's causal prefill attention FLOPs (Qwen2.5-7B's "
                         "heads, batch 1) at the H200's measured matmul rate", run=roofline.MATMUL_RUN,
                         file="measurements.json", unit="ms")
MEMORY_FLOOR = Quantity("h200.prefill.compulsory_floor", "one layer's compulsory prefill bytes (Q, K, V read once, O "
                        "written once) at the H200's bandwidth ceiling", run=bandwidth.RUNS["NVIDIA H200"],
                        file=bandwidth.FILE, unit="ms")
OVER_FLOORS = Quantity("h200.prefill.over_compute_floor", "a prefill kernel's time in the first full benchmark over "
                       "the time its FLOPs take at the H200's measured matmul rate", run=RECORD, file="prefill.csv",
                       unit="×")
OF_MATMUL = Quantity("h200.prefill.pct_of_matmul_rate", "a prefill kernel's FLOP/s in the first full benchmark as a "
                     "share of the H200's measured matmul rate", run=RECORD, file="prefill.csv", unit="%")
A10G_ITL = sweeps.SWEEP_QUANTITIES["a10g"]["itl"]  # the study's ITL, as chapter 6 states it
A10G_BUS = Quantity("a10g.sweep.itl_pct_bus_busy", "the least time a decode step's weight and KV bytes take at the "
                    "A10G's datasheet bandwidth, over the study's time per output token", run=reference.DATASET,
                    file="sweep.csv", unit="%")


def datasheet_roofs() -> dict:
    """Each GPU of the table on paper: datasheet peak and datasheet bandwidth (ridge = the datasheet ridge)."""
    return {key: roofline.datasheet_roof(dev) for key, dev in DEVICES.items()}


# --- facts ---------------------------------------------------------------------------------------------

def _matmul_facts() -> dict:
    square = roofline.matmul_kernel(SQUARE_N, SQUARE_N, SQUARE_N)
    decode_mm = roofline.matmul_kernel(1, MODEL.intermediate, MODEL.hidden)
    return {"sq_n": SQUARE_N, "sq_gflop": square.flops / 1e9, "sq_mb": square.bytes / 1e6, "sq_ai": square.intensity,
            "dec_h": MODEL.hidden, "dec_i": MODEL.intermediate, "dec_ai": decode_mm.intensity}


def _datasheet_facts() -> dict:
    return {"h100_tflops": Fact(H100.bf16_flops / TFLOPS, DATASHEET),  # unitless: the interview glues this name too
            "h100_tbs": bandwidth.datasheet_bandwidth(H100).to("TB/s"),
            "h100_ridge_datasheet": roofline.datasheet_ridge("H100-SXM"),
            "h200_tbs": bandwidth.datasheet_bandwidth(H200).to("TB/s"),
            "h200_ridge_datasheet": roofline.datasheet_ridge("H200-SXM"),
            "h200_gb": Fact(H200.memory_bytes / GB, DATASHEET),
            "a10g_tflops": roofline.datasheet_peak("A10G").to("TFLOP/s"),
            "a10g_gbs": bandwidth.datasheet_bandwidth(A10G).to("GB/s"),
            "a10g_ridge_datasheet": roofline.datasheet_ridge("A10G"),
            "a10_ridge": Fact(hardware.A10_BF16_FLOPS / A10G.bandwidth, DATASHEET),
            "a10_tflops": Fact(hardware.A10_BF16_FLOPS / TFLOPS, DATASHEET),
            "h100_fp32_ridge": Fact(H100.ridge("fp32"), DATASHEET)}


@functools.cache
def _serving():
    """The serving kernels at FIGURE_N tokens: prefill and decode of the whole model, attention's stages."""
    d = MODEL.head_dim
    qk, softmax, _ = roofline.attention_stages(FIGURE_N, FIGURE_N, d)
    prefill = roofline.model_phase(MODEL, "prefill", FIGURE_N, sram_bytes=H100.smem_per_sm)
    decode = roofline.model_phase(MODEL, "decode", FIGURE_N, sram_bytes=H100.smem_per_sm)
    flash = roofline.Kernel("flash", prefill["attention"].flops / MODEL.layers, prefill["attention"].bytes / MODEL.layers)
    compulsory = iomodel.attention_compulsory_bytes(MODEL, FIGURE_N, "prefill", per="layer")
    kernels = [
        roofline.Kernel(f"prefill matmuls ({FIGURE_N:,} tokens)", prefill["linear"].flops, prefill["linear"].bytes),
        roofline.Kernel("decode step (batch 1)", decode["total"].flops, decode["total"].bytes),
        roofline.Kernel("naive QK^T", qk.flops, qk.bytes),
        roofline.Kernel("naive softmax+mask", softmax.flops, softmax.bytes),
        roofline.Kernel("flash, compulsory bytes", flash.flops, compulsory),
        roofline.Kernel("flash, every K/V re-read from HBM", flash.flops, flash.bytes),
    ]
    return {"qk": qk, "softmax": softmax, "prefill": prefill, "decode": decode, "flash": flash,
            "compulsory": compulsory, "kernels": kernels}


@functools.cache
def _a10g_short():
    """The A10G study's shortest prompt with FlashAttention: its row of the sweep."""
    sweep = data.load(reference.DATASET).csv("sweep.csv", ["arm", "actual_len", "itl_ms"])
    rows = sweep[sweep.arm == "FLASH_ATTN"].sort_values("actual_len")
    return rows.iloc[0]


def _serving_facts() -> dict:
    s, roofs = _serving(), datasheet_roofs()
    ridge = roofs["H100-SXM"].ridge
    flash, compulsory = s["flash"], s["compulsory"]
    short = _a10g_short()
    n_short, itl = int(short.actual_len), float(short.itl_ms)
    short_step = roofline.model_phase(MODEL, "decode", n_short, sram_bytes=A10G.smem_per_sm)["total"]
    bound_ms = 1e3 * short_step.time(roofs["A10G"])
    return {
        "fig_n": FIGURE_N, "pf_ai": s["prefill"]["linear"].intensity, "dec_step_ai": s["decode"]["total"].intensity,
        "qk_ai": s["qk"].intensity, "qk_limit": MODEL.head_dim, "sm_ai": s["softmax"].intensity,
        "sm_ridge_x": ridge / s["softmax"].intensity,
        "flash_comp_ai": flash.flops / compulsory, "flash_reread_ai": flash.intensity,
        "flash_comp_x": flash.flops / compulsory / ridge, "flash_reread_x": flash.intensity / ridge,
        **{f"dec_ms_{key}": 1e3 * s["decode"]["total"].time(roofs[dev]) for key, dev in
           (("h100", "H100-SXM"), ("h200", "H200-SXM"), ("a10g", "A10G"))},
        "a10g_short_len": reference.PROMPT_TOKENS.fact(n_short, "short"),
        "ref_short_itl": A10G_ITL.fact(itl, "FLASH_ATTN", n_short),
        "ref_short_bound": Fact(bound_ms, "lab.results.roofline at the A10G's datasheet bandwidth"),
        "ref_short_pct": A10G_BUS.fact(100 * bound_ms / itl, "FLASH_ATTN", n_short),
        "weights_gb": weights_gb(), "weights_streamed_gb": streamed_weights_gb(),
        "embedding_gb": Fact(2 * MODEL.vocab * MODEL.hidden / GB, "lab.results.modelshape: Qwen2.5-7B config.json"),
    }


def prefill_check(n: int) -> dict:
    """The fastest kernel of the first full benchmark at ``n`` tokens against the H200's measured floors (its
    time, the time its FLOPs take at the matmul rate, its compulsory bytes at the bandwidth ceiling), as facts;
    chapter 2 quotes the same check at 32k."""
    check = fused_bound.h200_kernel_check(fused_bound.fastest_candidate(n), n)
    who = check["candidate"]
    return {"n": n, "kernel": Fact(label(who), f"data/{RECORD}/prefill.csv"),
            "ms": PREFILL_MS.fact(check["ms"], who, n, run=RECORD, detail="prefill.csv"),
            "compute_ms": COMPUTE_FLOOR.fact(check["compute_ms"], n),
            "memory_ms": MEMORY_FLOOR.fact(check["compulsory_ms"], n),
            "over": OVER_FLOORS.fact(check["ms"] / check["compute_ms"], who, n),
            "pct": OF_MATMUL.fact(100 * check["compute_ms"] / check["ms"], who, n),
            "rate": Fact(units.flops_rate(check["flops_per_s"]), f"data/{RECORD}/prefill.csv"),
            "check": check}


def _overhead_facts() -> dict:
    short, long_ = prefill_check(OVERHEAD_N), prefill_check(LONG_N)
    return {"oh_n": OVERHEAD_N, "oh_kernel": short["kernel"], "oh_us": short["ms"].to("us"),
            "oh_compute_us": short["compute_ms"].to("us"), "oh_memory_us": short["memory_ms"].to("us"),
            "oh_x": short["over"], "long_n": LONG_N, "long_kernel": long_["kernel"], "long_ms": long_["ms"],
            "long_compute_ms": long_["compute_ms"], "long_pct": long_["pct"]}


def _h200_measured_facts() -> dict:
    found = hardware.load_measurement(data.DATA_DIR / roofline.MATMUL_RUN)
    ceiling, stream = bandwidth.read_ceiling(H200), bandwidth.READ_STREAM.fact
    matmul = roofline.matmul_rate()
    rows = {int(r["size"]): r for r in (found.rows if found else ()) if r["kind"] == "matmul"}
    best = max(rows, key=lambda n: rows[n]["value"]) if rows else None
    sizes = GPU_SIZES[0]
    facts = {
        "matmul_rate_tf": matmul.to("TFLOP/s"),
        "matmul_pct_datasheet": MATMUL_PCT.fact(100 * found.peak_flops / H200.bf16_flops if found else None),
        "matmul_best_n": MATMUL_RUNS.fact(best, "best size"),
        "matmul_calls": MATMUL_RUNS.fact(int(rows[best]["reps"]) if best else None, "calls timed"),
        "matmul_sizes": Fact(", ".join(f"{n:,}" for n in sizes), "lab.measure.ceilings.GPU_SIZES"),
        "h200_ceiling": bandwidth.bandwidth_ceiling(H200).to("TB/s").shown_as("{:.2f} TB/s"),
        "h200_ceiling_spread": bandwidth.spread(H200).shown_as("{:.1f}%"),
        "ceiling_lo_mb": stream(ceiling.sizes[0] / 1e6 if ceiling.sizes else None, "smallest size", fmt="{:,.0f} MB"),
        "ceiling_hi_gb": stream(ceiling.sizes[1] / 1e9 if ceiling.sizes else None, "largest size", fmt="{:.1f} GB"),
        "h200_ceiling_pct": bandwidth.CEILING_OF_DATASHEET.fact(
            100 * ceiling.bytes_per_s / H200.bandwidth if ceiling.measured else None, "h200"),
        "h200_ridge_measured": roofline.measured_ridge(),
    }
    for n in sizes:
        facts[f"matmul_{n}_tf"] = MATMUL_RUNS.fact(rows[n]["value"] / 1e12 if n in rows else None, f"rate at {n}")
    return facts


@functools.cache
@functools.cache  # measured once per page run: the facts and the figure show the same measurement
def _this_machine():
    """This machine's ceilings, measured now (the GPU if there is one, else a quick CPU measurement)."""
    return hardware.measure() if env.detect().has_gpu else hardware.quick_cpu_ceilings()


def _this_machine_kernels(mine):
    return [roofline.matmul_kernel(512, 512, 512, mine.dtype, "matmul 512³"),
            roofline.attention_stages(2048, 2048, MODEL.head_dim, mine.dtype)[1]]


def _live_facts() -> dict:
    mine = _this_machine()
    here = "measured on the machine that built the page (lab.results.hardware.measure)"
    return {"my_machine": Fact(mine.name, here), "my_flops": Fact(units.flops_rate(mine.peak_flops), here),
            "my_bw": Fact(units.byte_rate(mine.bandwidth), here), "my_ridge": Fact(roofline.roof(mine).ridge, here),
            "my_dtype": Fact(mine.dtype, here), "my_sm_ai": Fact(_this_machine_kernels(mine)[1].intensity, here)}


@functools.cache
def facts() -> dict[str, Fact]:
    """Every fact chapter 1 states, by glue name."""
    found = (_matmul_facts() | _datasheet_facts() | _serving_facts() | _overhead_facts() | _h200_measured_facts()
            | _live_facts())
    return {key: value if isinstance(value, Fact) else Fact(value, MODELLED) for key, value in found.items()}


# --- figures and tables ---------------------------------------------------------------------------------

def spec_table():
    """The datasheet figures of the GPUs this book uses, with each one's datasheet ridge."""
    table = hardware.spec_table()
    table = table[["name", "bf16_tflops", "bandwidth_tb_s", "ridge_flop_per_byte", "smem_per_sm_kib", "sm_count",
                   "l2_mib", "memory_gb"]].rename(columns={
        "name": "GPU", "bf16_tflops": "dense bf16 TFLOP/s", "bandwidth_tb_s": "memory TB/s",
        "ridge_flop_per_byte": "datasheet ridge FLOP/byte", "smem_per_sm_kib": "shared mem / SM (KiB)",
        "sm_count": "SMs", "l2_mib": "L2 (MiB)", "memory_gb": "memory (GB)"})
    return table.style.hide(axis="index").format({
        "dense bf16 TFLOP/s": "{:.1f}", "memory TB/s": "{:.3f}", "datasheet ridge FLOP/byte": "{:.0f}",
        "shared mem / SM (KiB)": "{:.0f}", "SMs": "{:d}", "L2 (MiB)": "{:.0f}", "memory (GB)": "{:.0f}"})


def sources_table() -> LinkTable:
    """Where each GPU's figures come from."""
    return LinkTable(["GPU", "sources", "note"],
                     [[dev.name, sorted({(src.title, src.url) for src in dev.sources.values()}), dev.note]
                      for dev in DEVICES.values()])


def serving_figure():
    """The serving kernels at FIGURE_N tokens placed on the H100's datasheet roof, the A10G's and H200's beside it."""
    roofs = datasheet_roofs()
    _, ax = figure()
    return plot_roofline([roofs["H100-SXM"], roofs["H200-SXM"], roofs["A10G"]], _serving()["kernels"], ax=ax,
                         source="Roofs: datasheet peaks and datasheet bandwidths (lab.results.roofline.datasheet_roof). "
                                "Kernels: Qwen2.5-7B shape, bf16.",
                         title=f"Serving kernels at {FIGURE_N:,} tokens on the H100's roofline").figure


def explorer():
    """Where each kernel lands as the prompt length, the GPU and the dtype move."""
    return roofline_explorer()


def this_machine_figure():
    """The roofline of the machine that built the page, measured when it ran, with the same kernels on it."""
    mine = _this_machine()
    _, ax = figure()
    return plot_roofline([roofline.roof(mine)], _this_machine_kernels(mine), ax=ax,
                         source=f"Measured on {mine.name}, the machine that executed this page "
                                "(lab.results.hardware.measure).",
                         title="The roofline of the machine that built this page, measured").figure

"""Chapter 3, tiling and the online softmax: every fact the chapter states, its figures and its tables.

    glue_all(ch03.facts())          # the one hidden cell
    ch03.hierarchy_figure(), ch03.trace_table(), ch03.exactness_table(), ch03.tile_visits_figure(),
    ch03.bytes_figure()

Almost everything here is computed in NumPy when the page builds (lab.measure.attention.tiled) and by the closed
form of lab.results.iomodel; what is read from data is the H200's bandwidth ceiling (data/h200/bandwidth) and the
highest SM clock the first full kernel benchmark recorded (data/h200/kernels), which turns shared memory's
per-clock bandwidth into bytes per second. The code the chapter teaches (the online softmax, the tile loop, the
instrumented loop and the closed form) is shown on the page by function object, from the module that runs it.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from lab.book.facts import Fact
from lab.book.plots.hierarchy import plot_memory_hierarchy
from lab.book.plots.kernels import plot_bytes_vs_length, plot_tile_visits
from lab.measure.attention.reference import attention
from lab.measure.attention.tiled import online_softmax_trace, tiled_attention, tiled_attention_traffic
from lab.results import bandwidth, hardware, iomodel, kernel_runs, units
from lab.results.hardware import DEVICES
from lab.results.modelshape import qwen25_7b
from lab.results.quantities import Quantity

A10G, H200 = DEVICES["A10G"], DEVICES["H200-SXM"]
SOURCE = "computed in NumPy (lab.measure.attention.tiled) and by lab.results.iomodel's closed form; no GPU involved"
TRACE_ROW, TRACE_BLOCK = (1.0, 2.0, 3.0), 2       # the worked row of scores, read two at a time
EXACT_N, EXACT_D, EXACT_TILES = 1000, 64, (64, 48)  # a length no tile size divides, grouped-query heads
SMALL_N, SMALL_D, SMALL_BLOCK = 512, 64, 64
LENGTHS = [1024 * 2**i for i in range(6)]
D_MODEL, BPE = 128, 2
TILE_ROWS = 128
CODE = "lab.measure.attention.tiled, computed when the page was built"

CLOCK = Quantity("h200.kernels.highest_sm_mhz", "the highest SM clock nvidia-smi reported while the first full kernel "
                 "benchmark timed its prefill kernels", run=kernel_runs.RECORD, file="prefill.csv", unit="MHz")
SMEM_OVER_HBM = Quantity("h200.shared_memory_over_hbm", "the H200's shared-memory bandwidth (32 banks × 4 bytes per SM "
                         "per clock, all SMs, at the highest clock the benchmark recorded) over its bandwidth ceiling",
                         run=kernel_runs.RECORD, file="prefill.csv", unit="×")


#: Where a number computed from the shape and the datasheets (no data/ file) comes from.
MODELLED = "lab.results.iomodel and lab.measure.attention.tiled, computed when the page was built"

# --- where a tile lives ------------------------------------------------------------------------------------

def hierarchy_figure():
    """The memory ladder of the A10G and the H200: registers, shared memory, L2 and device memory."""
    return plot_memory_hierarchy([A10G, H200], source="Sizes and bandwidths: NVIDIA whitepapers, datasheets and the "
                                 "CUDA programming guide; the H200's L2 as its driver reports it and its HBM bandwidth "
                                 "as a measured read stream (lab.results.bandwidth).")


def _hierarchy_facts() -> dict:
    hbm = bandwidth.bandwidth_ceiling(H200)
    bench = kernel_runs.stored_runs(kernel_runs.RECORD)["bench run"]
    mhz = float(bench.csv("prefill.csv", ["sm_mhz"])["sm_mhz"].max())
    smem_bw = H200.sm_count * hardware.SHARED_BYTES_PER_CLOCK_PER_SM * mhz * 1e6
    return {"hier_clock": CLOCK.fact(mhz / 1e3, fmt="{:.2f} GHz"),
            "hier_smem_bw": Fact(units.byte_rate(smem_bw), CLOCK.source),
            "hier_smem_x": SMEM_OVER_HBM.fact(smem_bw / hbm.value if hbm.measured else None),
            "hier_onchip": units.byte_size(H200.sm_count * (H200.registers_per_sm + H200.smem_per_sm)),
            "hier_l2": units.byte_size(H200.l2_bytes), "hier_hbm": units.byte_size(H200.memory_bytes),
            "hier_sms": H200.sm_count, "hier_hbm_bw": hbm.to("TB/s").shown_as("{:.2f} TB/s"),
            "hier_scores": units.byte_size(32768 * 32768 * 2), "hier_tile_kib": 4 * TILE_ROWS * D_MODEL * BPE / 1024,
            "hier_smem_kib": H200.smem_per_sm / 1024}


# --- the online softmax, one row ------------------------------------------------------------------------------

@functools.cache
def _trace():
    steps, probs = online_softmax_trace(list(TRACE_ROW), block=TRACE_BLOCK)
    row = np.array(TRACE_ROW)
    return steps, float(np.abs(probs - np.exp(row) / np.exp(row).sum()).max())


def trace_table():
    """The running state after each tile of the worked row: its scores, the maximum, the rescale factor, the sum."""
    steps, _ = _trace()
    table = pd.DataFrame([{"tile": i + 1, "scores in the tile": ", ".join(f"{x:g}" for x in s["tile"]),
                           "running max m": s["m"], "old sum scaled by e^(m − m′)": s["rescale"],
                           "running sum ℓ": s["l"]} for i, s in enumerate(steps)])
    return table.style.hide(axis="index").format({"running max m": "{:g}", "old sum scaled by e^(m − m′)": "{:.4f}",
                                                  "running sum ℓ": "{:.4f}"})


def _trace_facts() -> dict:
    steps, err = _trace()
    return {"trace_rescale": Fact(steps[1]["rescale"], CODE), "trace_l": Fact(steps[1]["l"], CODE),
            "trace_err": Fact(err, CODE, units.power_of_ten)}


# --- exactness ------------------------------------------------------------------------------------------------

@functools.cache
def _errors() -> dict[bool, float]:
    """The tiled loop against the naive reference in float64: 8 query heads over 2 KV heads, causal and not."""
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 8, EXACT_N, EXACT_D)) * 2
    k = rng.standard_normal((1, 2, EXACT_N, EXACT_D))
    v = rng.standard_normal((1, 2, EXACT_N, EXACT_D))
    block_q, block_k = EXACT_TILES
    return {causal: float(np.abs(tiled_attention(q, k, v, causal, block_q=block_q, block_k=block_k)
                                 - attention(q, k, v, causal)).max()) for causal in (False, True)}


def exactness_table():
    """The largest difference between the tiled loop and the naive reference, without and with a causal mask."""
    errors = _errors()
    table = pd.DataFrame({"mask": ["none", "causal"], "largest |tiled − naive| (float64)": [errors[False], errors[True]]})
    return table.style.hide(axis="index").format({"largest |tiled − naive| (float64)": units.power_of_ten})


def _exact_facts() -> dict:
    errors = _errors()
    return {"exact_n": EXACT_N, "exact_bq": EXACT_TILES[0], "exact_bk": EXACT_TILES[1],
            "exact_err_full": Fact(errors[False], CODE, units.power_of_ten),
            "exact_err_causal": Fact(errors[True], CODE, units.power_of_ten)}


# --- counting the bytes ---------------------------------------------------------------------------------------

@functools.cache
def _small_traffic():
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, 1, SMALL_N, SMALL_D)).astype(np.float16) for _ in range(3))
    return tiled_attention_traffic(q, k, v, causal=True, block_q=SMALL_BLOCK, block_k=SMALL_BLOCK)[1]


def tile_visits_figure():
    """Which key tiles each query tile read under a causal mask, from the loop's own log."""
    return plot_tile_visits(_small_traffic(), SMALL_N // SMALL_BLOCK, SMALL_N // SMALL_BLOCK, SOURCE)


def _series() -> dict:
    return {
        "naive (scores through memory)": [iomodel.naive_attention_hbm_bytes(n, n, D_MODEL, BPE) for n in LENGTHS],
        "tiled, every K/V re-read, 64-row tiles": [iomodel.tiled_attention_hbm_bytes(n, n, D_MODEL, 64, 64, BPE, True)
                                                   for n in LENGTHS],
        "tiled, every K/V re-read, 128-row tiles": [iomodel.tiled_attention_hbm_bytes(n, n, D_MODEL, 128, 128, BPE, True)
                                                    for n in LENGTHS],
        "Q, K, V, O once (compulsory)": [4 * n * D_MODEL * BPE for n in LENGTHS],
    }


def bytes_figure():
    """Bytes one head moves through device memory, naive against tiled with two tile sizes, as the prompt grows."""
    return plot_bytes_vs_length(LENGTHS, _series(), SOURCE + "; d=128, bf16, one head")


def _bytes_facts() -> dict:
    series, heads = _series(), qwen25_7b().q_heads
    facts = {"small_n": SMALL_N, "small_counted": _small_traffic().total_bytes,
             "small_closed": iomodel.tiled_attention_hbm_bytes(SMALL_N, SMALL_N, SMALL_D, SMALL_BLOCK, SMALL_BLOCK, 2,
                                                               causal=True),
             "small_naive": iomodel.naive_attention_hbm_bytes(SMALL_N, SMALL_N, SMALL_D, 2)}
    for name, key in (("naive (scores through memory)", "naive"), ("tiled, every K/V re-read, 128-row tiles", "tiled128"),
                      ("tiled, every K/V re-read, 64-row tiles", "tiled64")):
        facts |= {f"bytes_{key}_1k": series[name][0] / 1e6, f"bytes_{key}_32k": series[name][-1] / 1e9}
    naive, tiled = series["naive (scores through memory)"][-1], series["tiled, every K/V re-read, 128-row tiles"][-1]
    return facts | {"ratio_32k": naive / tiled, "kv_mb_32k": 2 * LENGTHS[-1] * D_MODEL * BPE / 1e6, "qwen_heads": heads,
                    "scores_gb_32k": heads * LENGTHS[-1] ** 2 * BPE / 1e9}


@functools.cache
def facts() -> dict[str, Fact]:
    """Every fact chapter 3 states, by glue name."""
    found = _hierarchy_facts() | _trace_facts() | _exact_facts() | _bytes_facts()
    return {key: value if isinstance(value, Fact) else Fact(value, MODELLED) for key, value in found.items()}

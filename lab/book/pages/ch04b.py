"""Chapter 4b, the backward pass: every fact the chapter states, its figure, its tables and its explorer.

    glue_all(ch04b.facts())         # the one hidden cell
    ch04b.cpu_check(), ch04b.race_figure(), ch04b.race_table(), ch04b.counters_table(), ch04b.io_table(),
    ch04b.memory_table(), ch04b.explorer()

The runs it reads, each once: the backward race (data/h200/backward-race: ours, SDPA's flash backend and cuDNN at
4k-32k, one process, interleaved rounds) and its Nsight Compute counters at 16k (data/h200/backward-counters).
The IO argument holds P's bytes (:func:`lab.results.backward.stored_p`) against the H200's measured matmul rate and
bandwidth ceiling; the memory arithmetic is :func:`lab.results.backward.training_memory` on
Qwen2.5-7B's shape. The check on this page runs the kernels in Triton's interpreter (on a GPU box, on the GPU).

Glue names other pages take from here (the interview page, the course kit): ``bwd_vs_flash_16k`` and
``bwd_vs_cudnn_16k`` (our backward's speed against SDPA-flash and cuDNN at 16k), ``bwd_ms_ours_16k``,
``bwd_ms_flash_16k``, ``bwd_ms_cudnn_16k``, ``bwd_tflops_*_16k``, ``bwd_ratio_*_16k`` (backward / forward),
``ctr_dkdv_tensor``, ``ctr_dq_tensor``, ``ctr_cudnn_tensor``, ``ctr_flash_tensor`` (tensor-pipe busy shares),
``ctr_ours_dram_gb``, ``ctr_cudnn_dram_gb``, ``p_gb_16k``, ``p_traffic_ms_16k``, ``recompute_ms_16k``,
``recompute_intensity``, ``p_model_tb_32k``, ``lse_model_mb_32k``.
"""

from __future__ import annotations

import functools

import pandas as pd
import torch

from lab.book.backward_explorer import backward_explorer
from lab.book.facts import Fact
from lab.book.plots import caption, figure, legend_above, token_axis
from lab.measure.attention import backward as kernels
from lab.measure.attention.reference import attention_gradients_torch
from lab.names import colour, key, label
from lab.results import backward, bandwidth, kernel_runs, roofline
from lab.results.data import load
from lab.results.hardware import device
from lab.results.modelshape import qwen25_7b
from lab.results.quantities import Quantity
from lab.results.units import power_of_ten

N = 16384                    # the length the chapter reads the race and the counters at
LONG = 32768                 # the longest the race timed, and the length of the memory arithmetic
RACED = ("ours", "sdpa-flash", "sdpa-cudnn")   # the backward race's kernels the chapter quotes
MODEL = qwen25_7b()
H200 = device("H200-SXM")
MEMORY = "lab.results.backward.training_memory (causal half, Qwen2.5-7B: 28 layers x 28 query heads, batch 1)"
IO = "lab.results.backward.stored_p (causal, 28 query / 4 KV heads, d=128, bf16)"

# --- the quantities chapter 4b teaches ---------------------------------------------------------------

_SHAPE = "causal GQA attention, 28 query over 4 KV heads, d=128, bf16, batch 1"
_RACE = dict(run=backward.RACE_RUN, file="race.csv")
BWD_MS = Quantity("h200.backward.ms", f"one attention backward ({_SHAPE}): the median of forward + backward minus "
                  "the median of the forward alone, interleaved rounds in one process", unit="ms", **_RACE)
FWD_MS = Quantity("h200.backward.forward_ms", f"the forward alone ({_SHAPE}) in the backward race", unit="ms", **_RACE)
BWD_OVER_FWD = Quantity("h200.backward.over_forward", "a kernel's backward time over its own forward's, in the "
                        "backward race", unit="×", **_RACE)
BWD_TFLOPS = Quantity("h200.backward.tflops", "2.5 x the forward's matrix FLOPs (causal halved) over the backward's "
                      "time, in the backward race", unit="TFLOP/s", **_RACE)
BWD_SPEED = Quantity("h200.backward.speed_vs_peer", "a peer's backward time over our backward's at one length, "
                     "in the backward race (above 1: ours is faster)", unit="×", **_RACE)
_COUNTERS = dict(run=backward.COUNTERS_RUN, file="raw.csv")
_ONE_CALL = (f"one backward at 16k ({_SHAPE}) under Nsight Compute, after three warm-ups, caches flushed, clocks "
             "left free: ")
DKDV_ROWS = Quantity("h200.backward.dkdv_block_m", "query rows per tile of the dK/dV kernel's launch that the "
                     "autotuner picked, in the backward race", unit="rows", **_RACE)
DKDV_KEYS = Quantity("h200.backward.dkdv_block_n", "keys per tile of the dK/dV kernel's launch that the autotuner "
                     "picked, in the backward race", unit="keys", **_RACE)
CTR_MS = Quantity("h200.backward_counters.kernel_ms", _ONE_CALL + "one kernel's duration", unit="ms", **_COUNTERS)
CTR_TENSOR = Quantity("h200.backward_counters.tensor_busy", _ONE_CALL + "one kernel's tensor-pipe cycles as a share "
                      "of its SMs' active cycles", unit="%", **_COUNTERS)
CTR_DRAM = Quantity("h200.backward_counters.dram_bytes", _ONE_CALL + "DRAM bytes read and written, summed over the "
                    "job's kernels", unit="GB", **_COUNTERS)
CTR_DRAM_READ = Quantity("h200.backward_counters.dram_read", _ONE_CALL + "DRAM bytes one kernel read", unit="GB",
                         **_COUNTERS)
CTR_KERNELS = Quantity("h200.backward_counters.kernels", _ONE_CALL + "kernels the job launched", unit="kernels",
                       **_COUNTERS)
CTR_REGISTERS = Quantity("h200.backward_counters.registers", _ONE_CALL + "registers per thread of one kernel",
                         unit="registers", **_COUNTERS)
CTR_DQ_SHARE = Quantity("h200.backward_counters.dq_share", _ONE_CALL + "the dQ pass's duration as a share of our "
                        "job's three kernels", unit="%", **_COUNTERS)
P_OVER_DRAM = Quantity("h200.backward_counters.p_over_dram", "P of one causal layer at 16k (28 query heads, bf16), "
                       "written and read back, over the DRAM bytes a kernel's whole backward job moved under Nsight "
                       "Compute", unit="×", **_COUNTERS)
P_TRAFFIC_MS = Quantity("h200.backward.p_traffic_ms", "P of one causal layer at 16k (28 query heads, bf16) written by "
                        "the forward and read by the backward, at the H200's bandwidth ceiling", unit="ms",
                        run="h200/bandwidth", file="read_stream.csv")
RECOMPUTE_MS = Quantity("h200.backward.recompute_ms", "the extra product that rebuilds P (S = Q Kᵀ, causal halved, 28 "
                        "query heads, d=128) at the H200's measured matmul rate", unit="ms",
                        run=roofline.MATMUL_RUN, file="measurements.json")


# --- the runs, each read once ------------------------------------------------------------------------

@functools.cache
def _race() -> pd.DataFrame:
    return backward.race()


@functools.cache
def _forward_race() -> pd.DataFrame:
    """Chapter 4's race of record (the forward alone, inference calls), to set its times beside this race's."""
    return load(kernel_runs.RACE).csv("prefill.csv", ["candidate", "n", "status", "ms"])


@functools.cache
def _kernels() -> pd.DataFrame:
    return backward.kernels()


def _r(candidate: str, n: int = N):
    return backward.row(_race(), candidate, n)


def _kernel(candidate: str, name: str | None = None):
    """A kernel of a profiled job: by (a piece of) its name, or the job's main kernel."""
    table = _kernels()
    rows = table[(table.candidate == candidate) & (table.n == N)]
    rows = rows[rows.kernel.str.contains(name, regex=False)] if name else rows[rows.main]
    return rows.iloc[0]


def _totals(candidate: str):
    totals = backward.job_totals(_kernels())
    return totals[(totals.candidate == candidate) & (totals.n == N)].iloc[0]


# --- facts -------------------------------------------------------------------------------------------

def _race_facts() -> dict:
    facts = {}
    for candidate in RACED:
        for n in (N, LONG):
            at = f"{key(candidate)}_{n // 1024}k"
            r = _r(candidate, n)
            facts[f"bwd_ms_{at}"] = BWD_MS.fact(r.bwd_ms, candidate, n, fmt="{:.1f} ms")
            facts[f"bwd_tflops_{at}"] = BWD_TFLOPS.fact(r.tflops_bwd, candidate, n, fmt="{:.0f} TFLOP/s")
            facts[f"bwd_ratio_{at}"] = BWD_OVER_FWD.fact(r.bwd_over_fwd, candidate, n, fmt="{:.1f}×")
        facts[f"fwd_ms_{key(candidate)}_16k"] = FWD_MS.fact(_r(candidate).fwd_ms, candidate, N, fmt="{:.2f} ms")
    for n in sorted(set(_race().n)):
        for peer in ("sdpa-flash", "sdpa-cudnn"):
            facts[f"bwd_vs_{key(peer)}_{n // 1024}k"] = BWD_SPEED.fact(_r("ours", n)[f"vs_{peer}"], peer, n, fmt="{:.2f}×")
    # the same two forwards in chapter 4's race of record: another process on another day, and inference calls
    # (no log-sum-exp kept for a backward), so the chapter names them as that run's
    race = _forward_race()
    for candidate in ("ours-tuned", "sdpa-cudnn"):
        ms = float(race[(race.candidate == candidate) & (race.n == N) & (race.status == "ok")].ms.iloc[0])
        facts[f"fwd_race_ms_{key(candidate)}_16k"] = kernel_runs.PREFILL_MS.fact(ms, candidate, f"{N // 1024}k",
                                                                        fmt="{:.2f} ms")
    chosen = backward.launch(_r("ours").config)
    facts["dkdv_rows"] = DKDV_ROWS.fact(chosen["dkdv"]["BLOCK_M"], "ours", N, fmt="{:d}")
    facts["dkdv_keys"] = DKDV_KEYS.fact(chosen["dkdv"]["BLOCK_N"], "ours", N, fmt="{:d}")
    return facts


def _counter_facts() -> dict:
    dkdv, dq = _kernel("ours", "dkdv_kernel"), _kernel("ours", "dq_kernel")
    flash, cudnn = _kernel("sdpa-flash"), _kernel("sdpa-cudnn")
    gb = "{:.1f} GB"
    facts = {
        "ctr_dkdv_ms": CTR_MS.fact(dkdv.ms, "ours", "dkdv_kernel", fmt="{:.1f} ms"),
        "ctr_dq_ms": CTR_MS.fact(dq.ms, "ours", "dq_kernel", fmt="{:.1f} ms"),
        "ctr_flash_ms": CTR_MS.fact(flash.ms, "sdpa-flash", "main", fmt="{:.1f} ms"),
        "ctr_cudnn_ms": CTR_MS.fact(cudnn.ms, "sdpa-cudnn", "main", fmt="{:.1f} ms"),
        "ctr_dq_share": CTR_DQ_SHARE.fact(100 * dq.ms / _totals("ours").ms, "ours", fmt="{:.0f}%"),
        "ctr_dkdv_tensor": CTR_TENSOR.fact(dkdv.tensor_pct, "ours", "dkdv_kernel", fmt="{:.0f}%"),
        "ctr_dq_tensor": CTR_TENSOR.fact(dq.tensor_pct, "ours", "dq_kernel", fmt="{:.0f}%"),
        "ctr_flash_tensor": CTR_TENSOR.fact(flash.tensor_pct, "sdpa-flash", "main", fmt="{:.0f}%"),
        "ctr_cudnn_tensor": CTR_TENSOR.fact(cudnn.tensor_pct, "sdpa-cudnn", "main", fmt="{:.0f}%"),
        "ctr_dkdv_registers": CTR_REGISTERS.fact(dkdv.registers, "ours", "dkdv_kernel", fmt="{:.0f}"),
        "ctr_dkdv_read_gb": CTR_DRAM_READ.fact(dkdv.dram_read / 1e9, "ours", "dkdv_kernel", fmt=gb),
        "ctr_flash_kernels": CTR_KERNELS.fact(int(_totals("sdpa-flash").kernels), "sdpa-flash", fmt="{:d}"),
        "ctr_cudnn_kernels": CTR_KERNELS.fact(int(_totals("sdpa-cudnn").kernels), "sdpa-cudnn", fmt="{:d}"),
    }
    for candidate in RACED:
        t = _totals(candidate)
        facts[f"ctr_{key(candidate)}_dram_gb"] = CTR_DRAM.fact((t.dram_read + t.dram_write) / 1e9, candidate, fmt=gb)
    return facts


def _io_facts() -> dict:
    io = backward.stored_p(N)
    least = bandwidth.ceiling()
    matmul = roofline.matmul_rate().value
    p_ms, recompute_ms = io["p_traffic"] / least * 1e3, io["recompute_flops"] / matmul * 1e3
    cudnn = _totals("sdpa-cudnn")
    return {
        "p_gb_16k": Fact(io["p_bytes"] / 1e9, IO, "{:.1f} GB"),
        "p_traffic_gb_16k": Fact(io["p_traffic"] / 1e9, IO, "{:.0f} GB"),
        "least_gb_16k": Fact(io["recompute"] / 1e9, IO, "{:.2f} GB"),
        "p_over_cudnn_dram": P_OVER_DRAM.fact(io["p_traffic"] / (cudnn.dram_read + cudnn.dram_write), "sdpa-cudnn",
                                             fmt="{:.0f}×"),
        "p_traffic_ms_16k": P_TRAFFIC_MS.fact(p_ms, fmt="{:.1f} ms"),
        "recompute_ms_16k": RECOMPUTE_MS.fact(recompute_ms, fmt="{:.1f} ms"),
        "store_over_recompute": Fact(p_ms / recompute_ms, "P_TRAFFIC_MS / RECOMPUTE_MS (lab.book.pages.ch04b)",
                                     "{:.1f}×"),
        "recompute_intensity": Fact(backward.recompute_intensity(), IO, "{:.0f} FLOP/B"),
        "h200_ridge_measured": roofline.measured_ridge(),
    }


def _memory_facts() -> dict:
    long = backward.training_memory(LONG, MODEL)
    per, model = long["per_head_layer"], long["model"]
    return {
        "p_head_gib_32k": Fact(per["p_bf16"] / 2**30, MEMORY, "{:.1f} GiB"),
        "p32_head_gib_32k": Fact(per["p_fp32"] / 2**30, MEMORY, "{:.1f} GiB"),
        "lse_head_kib_32k": Fact(per["lse"] / 2**10, MEMORY, "{:.0f} KiB"),
        "p_model_tb_32k": Fact(model["p_bf16"] / 1e12, MEMORY, "{:.2f} TB"),
        "lse_model_mb_32k": Fact(model["lse"] / 1e6, MEMORY, "{:.0f} MB"),
        "h200_memory_gb": Fact(H200.memory_bytes / 1e9, "datasheet: lab.results.hardware (H200-SXM)", "{:.0f} GB"),
        "model_heads": Fact(MODEL.layers * MODEL.q_heads, MEMORY, "{:d}"),
    }


@functools.cache
def facts() -> dict[str, Fact]:
    """Every fact chapter 4b states, by glue name."""
    return _race_facts() | _counter_facts() | _io_facts() | _memory_facts() | _check_facts()


# --- the check on this machine ---------------------------------------------------------------------

#: The shapes the page checks on: (batch, query heads, KV heads, queries, keys, head dim); ragged, grouped.
CHECK_SHAPES = ((1, 4, 2, 37, 37, 16), (1, 3, 1, 40, 64, 32))


@functools.cache
def _check() -> tuple[dict, ...]:
    on_gpu = torch.cuda.is_available()
    rows = []
    for shape in CHECK_SHAPES:
        batch, q_heads, kv_heads, n_q, n_k, d = shape
        gen = torch.Generator(device="cuda" if on_gpu else "cpu").manual_seed(sum(shape))
        make = lambda h, n: torch.randn(batch, h, n, d, generator=gen, device=gen.device)  # noqa: E731
        q, k, v, do = make(q_heads, n_q), make(kv_heads, n_k), make(kv_heads, n_k), make(q_heads, n_q)
        q, k, v = (t.requires_grad_() for t in (q, k, v))
        out = kernels.attention(q, k, v, True, forward=kernels.reference_forward_with_lse)
        out.backward(do)                                   # loss.backward() runs the three kernels
        reference = attention_gradients_torch(q.detach(), k.detach(), v.detach(), do, True,
                                              compute_dtype=torch.float64)
        errors, worst = kernels.gradient_errors((q.grad, k.grad, v.grad), reference)
        rows.append({"shape (b, q heads, kv heads, n_q, n_k, d)": str(shape), "causal": True,
                     "max |err| dQ": errors[0], "max |err| dK": errors[1], "max |err| dV": errors[2],
                     "worst share of largest": worst, "tolerance (fp32)": kernels.GRAD_TOLERANCE[torch.float32]})
    return tuple(rows)


def _check_facts() -> dict:
    where = "lab.measure.attention.backward on the machine that built the page, against fp64 autograd"
    return {"check_worst": Fact(max(r["worst share of largest"] for r in _check()), where, power_of_ten),
            "check_tolerance": Fact(kernels.GRAD_TOLERANCE[torch.float32], "lab.measure.attention.backward."
                                    "GRAD_TOLERANCE", power_of_ten),
            "check_tolerance_bf16": Fact(kernels.GRAD_TOLERANCE[torch.bfloat16], "lab.measure.attention.backward."
                                         "GRAD_TOLERANCE", power_of_ten)}


def cpu_check():
    """The kernels through autograd (``loss.backward()``) on small ragged, grouped shapes, fp32, against fp64
    autograd of the reference."""
    return pd.DataFrame(list(_check())).style.hide(axis="index").format(
        {c: power_of_ten for c in ("max |err| dQ", "max |err| dK", "max |err| dV", "worst share of largest",
                               "tolerance (fp32)")})


# --- the race ----------------------------------------------------------------------------------------

def race_figure():
    """Backward TFLOP/s against length, one line per kernel (FA4 was not part of this race)."""
    fig, ax = figure()
    table = _race()
    for candidate in RACED:
        rows = table[table.candidate == candidate].sort_values("n")
        ax.plot(rows.n, rows.tflops_bwd, marker="o", label=label(candidate), color=colour(candidate))
    ax.set_xscale("log", base=2)
    token_axis(ax, sorted(set(table.n)))
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel("backward TFLOP/s")
    ax.set_ylim(bottom=0)
    legend_above(ax)
    caption(ax, "H200, bf16, causal GQA 28/4, d=128; backward = forward+backward − forward, interleaved rounds; "
                f"FLOPs = 2.5 × the forward's; data/{backward.RACE_RUN}")
    return fig


def race_table():
    """Every timed row: forward, backward, their ratio, TFLOP/s, and speed against the two peers."""
    table = _race().copy()
    table["kernel"] = table.candidate.map(label)
    shown = table[["kernel", "n", "fwd_ms", "bwd_ms", "bwd_over_fwd", "tflops_bwd", "vs_sdpa-flash", "vs_sdpa-cudnn"]]
    shown.columns = ["kernel", "tokens", "forward ms", "backward ms", "backward / forward", "backward TFLOP/s",
                     "vs SDPA flash", "vs cuDNN"]
    return shown.style.hide(axis="index").format({"tokens": "{:,}", "forward ms": "{:.2f}", "backward ms": "{:.2f}",
                                                   "backward / forward": "{:.2f}", "backward TFLOP/s": "{:.0f}",
                                                   "vs SDPA flash": "{:.2f}×", "vs cuDNN": "{:.2f}×"})


def counters_table():
    """Each kernel of the three backward jobs at 16k: time, tensor-pipe busy share, warps per SM, registers, DRAM."""
    table = _kernels().copy()
    table["kernel"] = table.kernel.str.replace(r"^void ", "", regex=True).str.split("<").str[0].str.split("(").str[0]
    table["who"] = table.candidate.map(label)
    shown = table[["who", "kernel", "ms", "tensor_pct", "warps_per_sm", "registers", "dram_read", "dram_write"]].copy()
    shown["dram_read"] /= 1e9
    shown["dram_write"] /= 1e9
    shown.columns = ["job", "kernel", "ms", "tensor pipe busy %", "warps / SM", "registers", "DRAM read GB",
                     "DRAM written GB"]
    return shown.style.hide(axis="index").format({"ms": "{:.3f}", "tensor pipe busy %": "{:.0f}",
                                                  "warps / SM": "{:.1f}", "registers": "{:.0f}",
                                                  "DRAM read GB": "{:.2f}", "DRAM written GB": "{:.2f}"})


def io_table():
    """At each length of the race: P's bytes (one layer, written and read back) against the least a backward moves,
    and the time each takes at the measured matmul rate and bandwidth ceiling."""
    least, matmul = bandwidth.ceiling(), roofline.matmul_rate().value
    rows = []
    for n in sorted(set(_race().n)):
        io = backward.stored_p(n)
        rows.append({"tokens": n, "P causal half, one layer (GB)": io["p_bytes"] / 1e9,
                     "P written + read (ms at the bandwidth ceiling)": io["p_traffic"] / least * 1e3,
                     "rebuilding S instead (ms at the matmul rate)": io["recompute_flops"] / matmul * 1e3,
                     "least a recomputing backward moves (GB)": io["recompute"] / 1e9})
    return pd.DataFrame(rows).style.hide(axis="index").format(
        {"tokens": "{:,}", "P causal half, one layer (GB)": "{:.2f}", "P written + read (ms at the bandwidth ceiling)": "{:.2f}",
         "rebuilding S instead (ms at the matmul rate)": "{:.2f}", "least a recomputing backward moves (GB)": "{:.3f}"})


def memory_table():
    """What the backward needs kept from the forward, per head per layer and over Qwen2.5-7B, P (its causal half,
    as the IO table counts it) against the LSE."""
    rows = []
    for n in (4096, 16384, 32768, 131072):
        m = backward.training_memory(n, MODEL)
        rows.append({"tokens": n, "P causal half bf16, one head, one layer (GiB)": m["per_head_layer"]["p_bf16"] / 2**30,
                     "P causal half fp32, one head, one layer (GiB)": m["per_head_layer"]["p_fp32"] / 2**30,
                     "P causal half bf16, whole model (GB)": m["model"]["p_bf16"] / 1e9,
                     "log-sum-exp, whole model (MB)": m["model"]["lse"] / 1e6})
    return pd.DataFrame(rows).style.hide(axis="index").format(
        {"tokens": "{:,}", "P causal half bf16, one head, one layer (GiB)": "{:.3f}",
         "P causal half fp32, one head, one layer (GiB)": "{:.3f}", "P causal half bf16, whole model (GB)": "{:,.0f}",
         "log-sum-exp, whole model (MB)": "{:.1f}"})


def explorer():
    """Length x kernel: the backward race."""
    return backward_explorer()

"""Explorers for the roofline and naive-attention chapters: prompt length, GPU, dtype -> intensity, bytes, time.

Everything shown is computed by lab.results.roofline and lab.results.iomodel from datasheet figures (lab.results.hardware) and
Qwen2.5-7B's shape (lab.results.modelshape): a model of the hardware, not a measurement, and the readouts say so.
"""

from __future__ import annotations

import functools

import numpy as np

from lab.results import dram_bytes, iomodel, roofline
from lab.results.hardware import DEVICES, DTYPE_BYTES, GB
from lab.results.modelshape import qwen25_7b
from lab.book.plots import color
from lab.book.explorer import Chart, Control, Explorer, Marker, Readout, Series, View

LENGTHS = [256 * 2**i for i in range(10)]  # 256 .. 131072
DTYPES = ["bf16", "fp32"]
DEFAULT_GPU = "H100-SXM"


def _gpu_control() -> Control:
    keys = list(DEVICES)
    return Control("gpu", "GPU (datasheet)", values=keys, default=DEFAULT_GPU, labels=[DEVICES[k].name for k in keys])


@functools.cache
def _layer_attention(n: int, gpu: str, dtype: str, phase: str, fused: bool) -> roofline.Kernel:
    """One layer's attention (every query head) at length n, as a roofline kernel."""
    shape, dev = qwen25_7b(), DEVICES[gpu]
    step = roofline.model_phase(shape, phase, n, dtype, fused=fused, sram_bytes=dev.smem_per_sm)
    kernel = step["attention"]
    return roofline.Kernel(("flash" if fused else "naive") + " attention",
                           kernel.flops / shape.layers, kernel.bytes / shape.layers)


@functools.cache
def _layer_attention_floor(n: int, gpu: str, dtype: str, phase: str) -> roofline.Kernel:
    """Flash attention's FLOPs over the compulsory bytes (Q, K, V, O once): the fewest bytes any kernel moves."""
    flash = _layer_attention(n, gpu, dtype, phase, True)
    floor = iomodel.attention_compulsory_bytes(qwen25_7b(), n, phase, DTYPE_BYTES[dtype], per="layer")
    return roofline.Kernel("flash, compulsory bytes", flash.flops, float(floor))


@functools.cache
def _measured_table():
    """The Nsight Compute table (H200, bf16, Qwen2.5-7B's head layout), or None while it is not on file."""
    return dram_bytes.load()


def _measured(n: int, gpu: str, dtype: str) -> dict:
    """Measured per-layer DRAM bytes of each candidate at length n: {candidate: Kernel}; empty when none."""
    table = _measured_table()
    if table is None or gpu != "H200-SXM" or dtype != "bf16":
        return {}
    rows = table[(table["n"] == n) & (table["batch"] == 1)]
    return {r.candidate: roofline.Kernel(f"measured: {r.candidate}", float(r.flops), float(r.measured_bytes))
            for r in rows.itertuples()}


#: The lengths the Nsight Compute run measures (H200, bf16, batch 1, prefill).
MEASURED_LENGTHS = (4096, 16384, 32768)


def _absent(length: int, gpu: str, dtype: str) -> str:
    """Why there is no measured point here: not yet taken, or not a combination that is measured."""
    if gpu == "H200-SXM" and dtype == "bf16" and length in MEASURED_LENGTHS:
        return "not measured yet"
    return "measured only on the H200, bf16, at 4,096, 16,384 and 32,768 tokens"


def _times(x: float) -> str:
    return f"{x:.2g}×" if x < 10 else f"{x:,.0f}×"


def _side(kernel: roofline.Kernel, r: roofline.Roof) -> str:
    return f"{kernel.bound(r)}-bound ({_times(kernel.intensity / r.ridge)} the ridge)"


def fused_verdict(compulsory: roofline.Kernel, reread: roofline.Kernel, r: roofline.Roof) -> str:
    """Which side of the ridge the fused kernel falls on, read from both byte counts."""
    low, high = reread.intensity / r.ridge, compulsory.intensity / r.ridge
    if high < 1:
        return f"memory-bound: even moving each byte once it sits at {_times(high)} the ridge"
    if low >= 1:
        return f"compute-bound under both counts ({_times(low)} to {_times(high)} the ridge)"
    return (f"compute-bound once the cache serves the K/V re-reads ({_times(high)} the ridge); "
            f"{_times(low)} if every re-read went to memory")


def _measured_text(measured: dict, r: roofline.Roof, absent: str) -> str:
    if not measured:
        return absent
    return "; ".join(f"{name} {k.intensity:,.0f} FLOP/B ({_times(k.intensity / r.ridge)} the ridge)"
                     for name, k in sorted(measured.items()))


def roofline_view(length: int, gpu: str, dtype: str) -> View:
    """The kernels of a prefill of ``length`` tokens placed on one GPU's roofline."""
    shape, dev = qwen25_7b(), DEVICES[gpu]
    r = roofline.datasheet_roof(dev, dtype)
    d = shape.head_dim
    reread = _layer_attention(length, gpu, dtype, "prefill", True)
    compulsory = _layer_attention_floor(length, gpu, dtype, "prefill")
    kernels = {
        "MLP matmul": roofline.matmul_kernel(length, shape.intermediate, shape.hidden, dtype, "MLP matmul"),
        "naive QK^T": roofline.attention_stages(length, length, d, dtype)[0],
        "naive softmax": roofline.attention_stages(length, length, d, dtype)[1],
        "naive attention": _layer_attention(length, gpu, dtype, "prefill", False),
        "decode step (batch 1)": roofline.model_phase(shape, "decode", length, dtype, sram_bytes=dev.smem_per_sm)["total"],
    }
    measured = _measured(length, gpu, dtype)
    xs = list(np.geomspace(0.5, 1e5, 60))
    series = [Series(f"{dev.key} roof", xs, [r.attainable(x) / 1e12 for x in xs], kind="line", color="#333333")]
    for name, k in kernels.items():
        series.append(Series(name, [k.intensity], [r.attainable(k.intensity) / 1e12], kind="points"))
    band = [reread.intensity, compulsory.intensity]
    series.append(Series("flash attention: re-read count to compulsory bytes", band,
                         [r.attainable(x) / 1e12 for x in band], kind="line+points", color=color("sdpa-flash")))
    for name, k in measured.items():
        series.append(Series(f"measured bytes: {name}", [k.intensity], [r.attainable(k.intensity) / 1e12],
                             kind="points"))  # a colour of its own, not the model's blue
    readouts = [
        Readout("ridge", "ridge point of this GPU and dtype", r.ridge, "FLOP/B", ".0f"),
        Readout("ai_mlp", "one MLP matmul alone (tokens × hidden → intermediate), intensity",
                kernels["MLP matmul"].intensity, "FLOP/B", ",.0f"),
        Readout("ai_softmax", "naive softmax intensity", kernels["naive softmax"].intensity, "FLOP/B", ".3g"),
        Readout("ai_naive", "naive attention intensity (one layer)", kernels["naive attention"].intensity, "FLOP/B", ".3g"),
        Readout("ai_compulsory", "flash attention, compulsory bytes (Q, K, V, O once)", compulsory.intensity,
                "FLOP/B", ",.0f"),
        Readout("ai_reread", "flash attention, every K/V tile re-read from memory", reread.intensity, "FLOP/B", ".3g"),
        Readout("ai_measured", "flash attention, measured DRAM bytes", _measured_text(measured, r, _absent(length, gpu, dtype))),
        Readout("side_flash", "flash attention (prefill) is", fused_verdict(compulsory, reread, r)),
        Readout("ai_decode", "decode step intensity (batch 1)", kernels["decode step (batch 1)"].intensity, "FLOP/B", ".3g"),
    ]
    chart = Chart(x_label="arithmetic intensity (FLOP/byte)", y_label="attainable TFLOP/s", series=series,
                  marker=Marker(compulsory.intensity, r.attainable(compulsory.intensity) / 1e12, "flash, compulsory"),
                  log_x=True, log_y=True, source=f"model from datasheet figures ({dev.name}); Qwen2.5-7B shape"
                  + ("; measured bytes: Nsight Compute on the H200" if measured else ""))
    return View(readouts=readouts, chart=chart,
                note=("Points sit on the roof: the best each kernel could do. The blue segment spans the fused "
                      "kernel's two byte counts; its real traffic lies on it."))


def roofline_explorer() -> Explorer:
    return Explorer(
        key="roofline-kernels", title="Kernels of a Qwen2.5-7B prefill on a GPU's roofline",
        controls=[Control("length", "Prompt length (tokens)", values=LENGTHS, default=8192), _gpu_control(),
                  Control("dtype", "dtype", values=DTYPES, default="bf16")],
        view=roofline_view,
        caption="Intensities from lab.results.roofline; roofs from datasheet figures in lab.results.hardware.")


def attention_bytes_view(length: int, gpu: str, dtype: str, phase: str) -> View:
    """Bytes and bound time of one layer's attention, naive vs flash (both counts), at one length."""
    shape, dev = qwen25_7b(), DEVICES[gpu]
    r = roofline.datasheet_roof(dev, dtype)
    naive = _layer_attention(length, gpu, dtype, phase, False)
    reread = _layer_attention(length, gpu, dtype, phase, True)
    floor = _layer_attention_floor(length, gpu, dtype, phase)
    limit = iomodel.max_naive_length(shape, dev.memory_bytes, DTYPE_BYTES[dtype])
    series = [
        Series("naive", LENGTHS, [_layer_attention(n, gpu, dtype, phase, False).bytes / GB for n in LENGTHS],
               kind="line+points", color=color("naive")),
        Series("flash: every K/V tile re-read (upper estimate)", LENGTHS,
               [_layer_attention(n, gpu, dtype, phase, True).bytes / GB for n in LENGTHS],
               kind="line+points", color=color("sdpa-flash")),
        Series("flash: compulsory, Q, K, V, O once (lower bound)", LENGTHS,
               [_layer_attention_floor(n, gpu, dtype, phase).bytes / GB for n in LENGTHS],
               kind="line", dashed=True, color=color("sdpa-cudnn")),
    ]
    if phase == "prefill":
        for name in sorted({c for n in LENGTHS for c in _measured(n, gpu, dtype)}):
            points = [(n, _measured(n, gpu, dtype)[name].bytes / GB) for n in LENGTHS if name in _measured(n, gpu, dtype)]
            series.append(Series(f"measured (Nsight Compute): {name}", [p[0] for p in points], [p[1] for p in points],
                                 kind="points"))  # a colour of its own, not the model's blue
    measured = _measured(length, gpu, dtype) if phase == "prefill" else {}
    need = iomodel.naive_intermediate_bytes(shape, length, DTYPE_BYTES[dtype]) / GB
    fits = ("yes" if phase == "decode" or length <= limit
            else f"no: {need:,.0f} GB needed, {dev.memory_bytes / GB:.0f} GB on the GPU")
    readouts = [
        Readout("naive_gb", "naive: HBM bytes per layer", naive.bytes / GB, "GB", ".3g"),
        Readout("reread_gb", "flash, every K/V tile re-read: bytes per layer", reread.bytes / GB, "GB", ".3g"),
        Readout("floor_gb", "flash, compulsory bytes per layer", floor.bytes / GB, "GB", ".3g"),
        Readout("measured_gb", "flash, measured DRAM bytes per layer",
                "; ".join(f"{name} {k.bytes / GB:.3g} GB" for name, k in sorted(measured.items()))
                or (_absent(length, gpu, dtype) if phase == "prefill" else "prefill only")),
        Readout("ratio", "naive ÷ flash bytes (re-read count)", naive.bytes / reread.bytes, "×", ".3g"),
        Readout("naive_ms", "naive: bound time per layer", 1e3 * naive.time(r), "ms", ".3g"),
        Readout("floor_ms", "flash: bound time per layer (compulsory bytes)", 1e3 * floor.time(r), "ms", ".3g"),
        Readout("reread_ms", "flash: bound time if every re-read went to memory", 1e3 * reread.time(r), "ms", ".3g"),
        Readout("naive_side", "naive attention is", _side(naive, r)),
        Readout("flash_side", "flash attention is", fused_verdict(floor, reread, r)),
        Readout("fits", "S and P (one layer) fit in GPU memory?", fits),
    ]
    chart = Chart(x_label="prompt length (tokens)" if phase == "prefill" else "context length (tokens)",
                  y_label="HBM traffic per layer (GB)", series=series,
                  marker=Marker(length, naive.bytes / GB, "naive, here"), log_x=True, log_y=True,
                  source=f"model: {dev.name} datasheet, Qwen2.5-7B shape, {dtype}"
                  + ("; points: Nsight Compute on the H200" if len(series) > 3 else ""))
    note = ("Decode reads the KV cache once either way: no n×n matrix to remove." if phase == "decode"
            else f"Naive attention's S and P stop fitting beside the weights above {limit:,} tokens on this GPU.")
    return View(readouts=readouts, chart=chart, note=note)


def attention_bytes_explorer() -> Explorer:
    return Explorer(
        key="attention-bytes", title="Naive vs flash attention: bytes moved and bound time per layer",
        controls=[Control("length", "Prompt / context length (tokens)", values=LENGTHS, default=8192), _gpu_control(),
                  Control("dtype", "dtype", values=DTYPES, default="bf16"),
                  Control("phase", "Phase", values=["prefill", "decode"], default="prefill")],
        view=attention_bytes_view,
        caption="Bytes from lab.results.iomodel; time = max(FLOPs / peak, bytes / bandwidth) from datasheet figures.")

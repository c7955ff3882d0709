"""Explorers for the roofline and naive-attention chapters: prompt length, GPU, dtype -> intensity, bytes, time.

Everything shown is computed by lab.results.roofline and lab.results.iomodel from datasheet figures (lab.results.hardware) and
Qwen2.5-7B's shape (lab.results.modelshape): a model of the hardware, not a measurement, and the readouts say so.
"""

from __future__ import annotations

import functools

import numpy as np

from lab.results import iomodel

from lab.results import roofline
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
    """Flash attention's FLOPs over the compulsory bytes (Q, K, V, O once): the L2-catches-everything limit."""
    flash = _layer_attention(n, gpu, dtype, phase, True)
    floor = iomodel.attention_compulsory_bytes(qwen25_7b(), n, phase, DTYPE_BYTES[dtype], per="layer")
    return roofline.Kernel("flash, K/V once", flash.flops, float(floor))


def _side(kernel: roofline.Kernel, r: roofline.Roof) -> str:
    return f"{kernel.bound(r)}-bound ({kernel.intensity / r.ridge:.2g}× the ridge)"


def roofline_view(length: int, gpu: str, dtype: str) -> View:
    """The kernels of a prefill of ``length`` tokens placed on one GPU's roofline."""
    shape, dev = qwen25_7b(), DEVICES[gpu]
    r = roofline.roof(dev, dtype)
    d = shape.head_dim
    kernels = {
        "MLP matmul": roofline.matmul_kernel(length, shape.intermediate, shape.hidden, dtype, "MLP matmul"),
        "naive QK^T": roofline.attention_stages(length, length, d, dtype)[0],
        "naive softmax": roofline.attention_stages(length, length, d, dtype)[1],
        "naive attention": _layer_attention(length, gpu, dtype, "prefill", False),
        "flash attention": _layer_attention(length, gpu, dtype, "prefill", True),
        "flash, K/V once": _layer_attention_floor(length, gpu, dtype, "prefill"),
        "decode step (batch 1)": roofline.model_phase(shape, "decode", length, dtype, sram_bytes=dev.smem_per_sm)["total"],
    }
    xs = list(np.geomspace(0.5, 2e4, 60))
    series = [Series(f"{dev.key} roof", xs, [r.attainable(x) / 1e12 for x in xs], kind="line", color="#333333")]
    for name, k in kernels.items():
        series.append(Series(name, [k.intensity], [r.attainable(k.intensity) / 1e12], kind="points"))
    flash = kernels["flash attention"]
    readouts = [
        Readout("ridge", "ridge point of this GPU and dtype", r.ridge, "FLOP/B", ".0f"),
        Readout("ai_mlp", "MLP matmul intensity", kernels["MLP matmul"].intensity, "FLOP/B", ",.0f"),
        Readout("ai_softmax", "naive softmax intensity", kernels["naive softmax"].intensity, "FLOP/B", ".3g"),
        Readout("ai_naive", "naive attention intensity (one layer)", kernels["naive attention"].intensity, "FLOP/B", ".3g"),
        Readout("ai_flash", "flash attention intensity (one layer)", flash.intensity, "FLOP/B", ".3g"),
        Readout("side_flash", "flash attention is", _side(flash, r)),
        Readout("ai_floor", "flash with every K/V re-read served by L2", kernels["flash, K/V once"].intensity,
                "FLOP/B", ",.0f"),
        Readout("ai_decode", "decode step intensity (batch 1)", kernels["decode step (batch 1)"].intensity, "FLOP/B", ".3g"),
    ]
    chart = Chart(x_label="arithmetic intensity (FLOP/byte)", y_label="attainable TFLOP/s", series=series,
                  marker=Marker(flash.intensity, r.attainable(flash.intensity) / 1e12, "flash attention"),
                  log_x=True, log_y=True, source=f"model from datasheet figures ({dev.name}); Qwen2.5-7B shape")
    return View(readouts=readouts, chart=chart,
                note="Points sit on the roof: the best each kernel could do. Below the ridge, bandwidth sets the pace.")


def roofline_explorer() -> Explorer:
    return Explorer(
        key="roofline-kernels", title="Kernels of a Qwen2.5-7B prefill on a GPU's roofline",
        controls=[Control("length", "Prompt length (tokens)", values=LENGTHS, default=8192), _gpu_control(),
                  Control("dtype", "dtype", values=DTYPES, default="bf16")],
        view=roofline_view,
        caption="Intensities from lab.results.roofline; roofs from datasheet figures in lab.results.hardware.")


def attention_bytes_view(length: int, gpu: str, dtype: str, phase: str) -> View:
    """Bytes and bound time of one layer's attention, naive vs flash, at one prompt/context length."""
    shape, dev = qwen25_7b(), DEVICES[gpu]
    r = roofline.roof(dev, dtype)
    naive = _layer_attention(length, gpu, dtype, phase, False)
    flash = _layer_attention(length, gpu, dtype, phase, True)
    limit = iomodel.max_naive_length(shape, dev.memory_bytes, DTYPE_BYTES[dtype])
    series = []
    for name, fused in (("naive", False), ("flash", True)):
        ys = [_layer_attention(n, gpu, dtype, phase, fused).bytes / GB for n in LENGTHS]
        series.append(Series(name, LENGTHS, ys, kind="line+points", color=color("naive" if name == "naive" else "sdpa-flash")))
    series.append(Series("floor: Q, K, V, O once", LENGTHS,
                         [_layer_attention_floor(n, gpu, dtype, phase).bytes / GB for n in LENGTHS],
                         kind="line", dashed=True, color=color("sdpa-cudnn")))
    floor = _layer_attention_floor(length, gpu, dtype, phase)
    need = iomodel.naive_intermediate_bytes(shape, length, DTYPE_BYTES[dtype]) / GB
    fits = ("yes" if phase == "decode" or length <= limit
            else f"no: {need:,.0f} GB needed, {dev.memory_bytes / GB:.0f} GB on the GPU")
    readouts = [
        Readout("naive_gb", "naive: HBM bytes per layer", naive.bytes / GB, "GB", ".3g"),
        Readout("flash_gb", "flash: HBM bytes per layer", flash.bytes / GB, "GB", ".3g"),
        Readout("ratio", "naive ÷ flash bytes", naive.bytes / flash.bytes, "×", ".3g"),
        Readout("naive_ms", "naive: bound time per layer", 1e3 * naive.time(r), "ms", ".3g"),
        Readout("flash_ms", "flash: bound time per layer", 1e3 * flash.time(r), "ms", ".3g"),
        Readout("floor_ms", "flash, K/V re-reads from L2: bound time", 1e3 * floor.time(r), "ms", ".3g"),
        Readout("naive_side", "naive attention is", _side(naive, r)),
        Readout("flash_side", "flash attention is", _side(flash, r)),
        Readout("fits", "S and P (one layer) fit in GPU memory?", fits),
    ]
    chart = Chart(x_label="prompt length (tokens)" if phase == "prefill" else "context length (tokens)",
                  y_label="HBM traffic per layer (GB)", series=series,
                  marker=Marker(length, naive.bytes / GB, "naive, here"), log_x=True, log_y=True,
                  source=f"model: {dev.name} datasheet, Qwen2.5-7B shape, {dtype}")
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

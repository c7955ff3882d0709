"""Figures for the n×n matrix: attention's HBM bytes, its memory footprint and its bound time vs length."""

from __future__ import annotations

import numpy as np

from lab.results import iomodel

from lab.results import roofline
from lab.results.hardware import GB, Device
from lab.book.plots import caption, color, figure


def _layer_kernel(shape, n: int, dev: Device, fused: bool, phase: str = "prefill") -> roofline.Kernel:
    step = roofline.model_phase(shape, phase, n, "bf16", fused=fused, sram_bytes=dev.smem_per_sm)
    return roofline.Kernel("attention", step["attention"].flops / shape.layers, step["attention"].bytes / shape.layers)


def plot_bytes_and_footprint(shape, lengths, dev: Device, devices: list[Device], source: str, measured=None):
    """Left: HBM bytes per layer (naive, flash's two counts, measured DRAM bytes when given). Right: S+P footprint.

    ``measured``: the table of :func:`lab.results.dram_bytes.load` (per-layer bytes of each candidate), or None.
    """
    fig, (left, right) = figure(1, 2, figsize=(10, 4))
    naive = [iomodel.attention_hbm_bytes(shape, n, "prefill", "naive", dev.smem_per_sm, per="layer") / GB for n in lengths]
    flash = [iomodel.attention_hbm_bytes(shape, n, "prefill", "flash", dev.smem_per_sm, per="layer") / GB for n in lengths]
    floor = [iomodel.attention_compulsory_bytes(shape, n, "prefill", per="layer") / GB for n in lengths]
    left.plot(lengths, naive, "o-", color=color("naive"), label="naive: S and P through HBM")
    left.plot(lengths, flash, "s-", color=color("sdpa-flash"),
              label=f"flash, every K/V tile re-read ({dev.key} tiles): upper estimate")
    left.plot(lengths, floor, "--", color=color("sdpa-cudnn"), label="flash, compulsory (Q, K, V, O once): floor")
    if measured is not None:
        for name, rows in measured.groupby("candidate"):
            left.plot(rows["n"], rows["measured_bytes"] / GB, "D", ms=6, mec="black", mew=0.6, color=color(name),
                      label=f"measured on the H200: {name}")
    left.set(xscale="log", yscale="log", xlabel="prompt length n (tokens)", ylabel="HBM bytes per layer (GB)",
             title="bytes moved by one layer's attention (prefill)")
    left.legend(fontsize=7, loc="lower right")
    footprint = [iomodel.naive_intermediate_bytes(shape, n) / GB for n in lengths]
    right.plot(lengths, footprint, "o-", color=color("naive"), label="S and P, one layer, all heads")
    for other in devices:
        free = (other.memory_bytes - 2 * shape.parameters) / GB
        line = right.axhline(free, ls=":", lw=1, color=color(other.key))
        limit = iomodel.max_naive_length(shape, other.memory_bytes)
        right.annotate(f"{other.key}: room beside weights, fits to n={limit:,}", (lengths[0], free),
                       textcoords="offset points", xytext=(2, 3), fontsize=7, color=line.get_color())
    right.set(xscale="log", yscale="log", xlabel="prompt length n (tokens)", ylabel="GB",
              title="memory the n×n intermediates need")
    right.legend(fontsize=7, loc="lower right")
    fig.subplots_adjust(bottom=0.2, wspace=0.3)
    caption(left, source)
    return fig


def plot_bound_times(shape, lengths, devices: list[Device], source: str):
    """Lower-bound time of one layer's attention vs length on each device: naive, and flash under both counts.

    Flash's solid line uses the compulsory bytes (a true lower bound); its dotted line charges every K/V
    re-read to memory (what the time would be with no cache reuse).
    """
    fig, ax = figure(figsize=(9.0, 4.2))
    for dev in devices:
        r = roofline.roof(dev)
        naive = [1e3 * _layer_kernel(shape, n, dev, False).time(r) for n in lengths]
        reread = [_layer_kernel(shape, n, dev, True) for n in lengths]
        floor = [1e3 * max(k.flops / r.peak_flops,
                           iomodel.attention_compulsory_bytes(shape, n, "prefill", per="layer") / r.bandwidth)
                 for n, k in zip(lengths, reread, strict=True)]
        ax.plot(lengths, naive, "o-", ms=4, color=color(dev.key), label=f"{dev.key}, naive")
        ax.plot(lengths, floor, "s--", ms=4, color=color(dev.key), label=f"{dev.key}, flash (compulsory bytes)")
        ax.plot(lengths, [1e3 * k.time(r) for k in reread], ":", color=color(dev.key),
                label=f"{dev.key}, flash if every re-read went to memory")
    ax.set(xscale="log", yscale="log", xlabel="prompt length n (tokens)", ylabel="bound time per layer (ms)",
           title="max(FLOPs/peak, bytes/bandwidth) for one layer's attention")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.subplots_adjust(bottom=0.2, right=0.64)
    caption(ax, source)
    return fig


def plot_attention_share(shape, lengths, published: dict, source: str):
    """Attention's share of prefill FLOPs vs length, with published quadratic shares as points."""
    fig, ax = figure()
    grid = sorted({int(x) for x in np.geomspace(min(lengths), max(lengths), 80)})
    shares = [100 * iomodel.attention_flop_share(shape, n) for n in grid]
    ax.plot(grid, shares, "-", color="#333333", label="model: attention's share of prefill FLOPs")
    for arm, points in published.items():
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        ax.plot(xs, ys, "o", color=color(arm), label=f"A10G, vLLM 0.11, {arm}: fitted quadratic share")
    cross = iomodel.crossover_length(shape)
    ax.axvline(cross, color="#555555", lw=0.8, ls=":")
    ax.annotate(f"attention = matmuls at n = {cross:,}", (cross, 5), textcoords="offset points", xytext=(-4, 0),
                ha="right", fontsize=7)
    ax.set(xscale="log", xlabel="prompt length n (tokens)", ylabel="share (%)", ylim=(0, 100),
           title="how much of prefill is attention")
    ax.legend(fontsize=7, loc="upper left")
    fig.subplots_adjust(bottom=0.2)
    caption(ax, source)
    return fig

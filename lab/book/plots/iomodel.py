"""Figures for the n×n matrix: attention's HBM bytes, its memory footprint and its bound time vs length."""

from __future__ import annotations

import numpy as np

from lab.book.plots import (
    WIDTH_IN,
    caption,
    color,
    figure,
    floor_pt,
    legend_above,
    plain_log_axis,
    style_legend,
    token_axis,
)
from lab.results import iomodel, roofline
from lab.results.hardware import GB, Device


def _layer_kernel(shape, n: int, dev: Device, fused: bool, phase: str = "prefill") -> roofline.Kernel:
    step = roofline.model_phase(shape, phase, n, "bf16", fused=fused, sram_bytes=dev.smem_per_sm)
    return roofline.Kernel("attention", step["attention"].flops / shape.layers, step["attention"].bytes / shape.layers)


def plot_bytes_and_footprint(shape, lengths, dev: Device, devices: list[Device], source: str, measured=None):
    """Top: HBM bytes per layer (naive, flash's two counts, measured DRAM bytes when given). Bottom: S+P footprint.

    ``measured``: the table of :func:`lab.results.dram_bytes.load` (per-layer bytes of each candidate), or None.
    """
    fig, (left, right) = figure(2, 1, figsize=(WIDTH_IN, 10.0))
    small = floor_pt(fig)
    naive = [iomodel.attention_hbm_bytes(shape, n, "prefill", "naive", dev.smem_per_sm, per="layer") / GB for n in lengths]
    flash = [iomodel.attention_hbm_bytes(shape, n, "prefill", "flash", dev.smem_per_sm, per="layer") / GB for n in lengths]
    floor = [iomodel.attention_compulsory_bytes(shape, n, "prefill", per="layer") / GB for n in lengths]
    left.plot(lengths, naive, "o-", color=color("naive"), label="naive: S and P through HBM")
    left.plot(lengths, flash, "s-", color=color("sdpa-flash"),
              label=f"flash, every K/V tile re-read\n({dev.key} tiles): upper estimate")
    left.plot(lengths, floor, "--", color=color("sdpa-cudnn"), label="flash, compulsory\n(Q, K, V, O once): floor")
    if measured is not None:
        for name, rows in measured.groupby("candidate"):
            left.plot(rows["n"], rows["measured_bytes"] / GB, "D", ms=6, mec="black", mew=0.6, color=color(name),
                      label=f"measured on the H200: {name}")
    left.set(xscale="log", yscale="log", xlabel="prompt length n (tokens)", ylabel="HBM bytes per layer (GB)")
    legend_above(left, title="bytes moved by one layer's attention (prefill)")
    footprint = [iomodel.naive_intermediate_bytes(shape, n) / GB for n in lengths]
    right.plot(lengths, footprint, "o-", color=color("naive"), label="S and P, one layer, all heads")
    highest = max(devices, key=lambda d: d.memory_bytes)
    for other in devices:
        free = (other.memory_bytes - 2 * shape.parameters) / GB
        line = right.axhline(free, ls=":", lw=1, color=color(other.key))
        limit = iomodel.max_naive_length(shape, other.memory_bytes)
        # at the left, where the curve is low; the highest line's words above it, the others' below theirs,
        # so neighbouring lines (80 and 141 GB) keep their words apart
        above = other is highest
        right.annotate(f"{other.key}: room beside\nweights, fits to n={limit:,}", (lengths[0], free),
                       textcoords="offset points", xytext=(2, 3 if above else -3), fontsize=small,
                       va="bottom" if above else "top", color=line.get_color())
    right.set(xscale="log", yscale="log", xlabel="prompt length n (tokens)", ylabel="GB")
    legend_above(right, title="memory the n×n intermediates need")
    for ax in (left, right):
        token_axis(ax, lengths)
        plain_log_axis(ax.yaxis)
    caption(right, source)
    return fig


def plot_bound_times(shape, lengths, devices: list[Device], source: str, roof_of=roofline.roof):
    """Lower-bound time of one layer's attention vs length on each device: naive, and flash under both counts.

    Flash's solid line uses the compulsory bytes (a true lower bound); its dotted line charges every K/V
    re-read to memory (what the time would be with no cache reuse). ``roof_of``: each device's roof (its bandwidth
    ceiling by default; :func:`lab.results.roofline.datasheet_roof` to compare GPUs on paper).
    """
    fig, ax = figure(figsize=(WIDTH_IN, 5.6))
    for dev in devices:
        r = roof_of(dev)
        naive = [1e3 * _layer_kernel(shape, n, dev, False).time(r) for n in lengths]
        reread = [_layer_kernel(shape, n, dev, True) for n in lengths]
        floor = [1e3 * max(k.flops / r.peak_flops,
                           iomodel.attention_compulsory_bytes(shape, n, "prefill", per="layer") / r.bandwidth)
                 for n, k in zip(lengths, reread, strict=True)]
        ax.plot(lengths, naive, "o-", ms=4, color=color(dev.key), label=f"{dev.key}, naive")
        ax.plot(lengths, floor, "s--", ms=4, color=color(dev.key), label=f"{dev.key}, flash (compulsory bytes)")
        ax.plot(lengths, [1e3 * k.time(r) for k in reread], ":", color=color(dev.key),
                label=f"{dev.key}, flash if every re-read went to memory")
    ax.set(xscale="log", yscale="log", xlabel="prompt length n (tokens)", ylabel="bound time per layer (ms)")
    token_axis(ax, lengths)
    plain_log_axis(ax.yaxis)
    fig.suptitle("max(FLOPs/peak, bytes/bandwidth)\nfor one layer's attention", fontsize=11)
    # colour names the GPU, line style the count: six short rows instead of one long row per line
    style_legend(ax, {dev.key: color(dev.key) for dev in devices},
                 {"naive": {"ls": "-", "marker": "o", "ms": 4}, "flash (compulsory bytes)": {"ls": "--", "marker": "s", "ms": 4},
                  "flash if every re-read went to memory": {"ls": ":"}})
    caption(ax, source)
    return fig


def plot_attention_share(shape, lengths, published: dict, source: str):
    """Attention's share of prefill FLOPs vs length, with published quadratic shares as points."""
    fig, ax = figure(figsize=(WIDTH_IN, 4.8))
    grid = sorted({int(x) for x in np.geomspace(min(lengths), max(lengths), 80)})
    shares = [100 * iomodel.attention_flop_share(shape, n) for n in grid]
    ax.plot(grid, shares, "-", color="#333333", label="model: attention's share of prefill FLOPs")
    for arm, points in published.items():
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        ax.plot(xs, ys, "o", color=color(arm), label=f"A10G, vLLM 0.11, {arm}:\nfitted quadratic share")
    cross = iomodel.crossover_length(shape)
    ax.axvline(cross, color="#555555", lw=0.8, ls=":")
    ax.annotate(f"attention = matmuls at n = {cross:,}", (cross, 97), textcoords="offset points", xytext=(-4, 0),
                ha="right", va="top", fontsize=floor_pt(fig))
    ax.set(xscale="log", xlabel="prompt length n (tokens)", ylabel="share (%)", ylim=(0, 100))
    token_axis(ax, lengths)
    legend_above(ax, title="how much of prefill is attention")
    caption(ax, source)
    return fig

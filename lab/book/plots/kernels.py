"""Figures for the tiling, FlashAttention-in-Triton and split-KV decode chapters."""

from __future__ import annotations

import textwrap

import matplotlib.colors
import numpy as np

from lab.book.plots import WIDTH_IN, caption, color, figure, legend_above, plain_log_axis, token_axis


def plot_tile_visits(traffic, n_q_tiles: int, n_k_tiles: int, source: str):
    """Which (query tile, key tile) pairs one head's tiled loop visited, from a TileTraffic record."""
    grid = np.zeros((n_q_tiles, n_k_tiles))
    for b, h, q_tile, k_tile, read, _ in traffic.steps:
        if b == 0 and h == 0 and k_tile >= 0:
            grid[q_tile, k_tile] += read
    fig, ax = figure(figsize=(4.6, 4.6))
    # a hue, not light vs dark: the dark theme inverts figures, and "filled" must still read as filled
    visited = matplotlib.colors.ListedColormap(["white", color("matmul")])
    ax.imshow(grid > 0, cmap=visited, vmin=0, vmax=1, origin="upper")
    ax.set_xlabel("key tile")
    ax.set_ylabel("query tile")
    ax.grid(False)
    ax.set_title("tiles the causal loop visits (filled)\nand skips (empty)", fontsize=10)
    caption(ax, source)
    return fig


def plot_bytes_vs_length(lengths, series: dict, source: str, ylabel: str = "HBM bytes per head"):
    """Bytes moved against sequence length, one line per method (log-log)."""
    fig, ax = figure(figsize=(WIDTH_IN, 4.8))
    for name, values in series.items():
        ax.loglog(lengths, values, marker="o", ms=3, label=name,
                  color=color("naive") if name.startswith("naive") else None)
    token_axis(ax, lengths)
    plain_log_axis(ax.yaxis, unit="B")
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel(ylabel)
    legend_above(ax)
    caption(ax, source)
    return fig


def plot_prefill(table, labels: dict, source: str):
    """TFLOP/s against prompt length for every candidate that ran."""
    fig, ax = figure(figsize=(WIDTH_IN, 4.8))
    for name, label in labels.items():
        rows = table[(table.candidate == name) & (table.status == "ok")].sort_values("n")
        if len(rows):
            ax.plot(rows.n, rows.tflops, marker="o", ms=3, label=label, color=color(name))
    token_axis(ax, sorted(table.n.unique()))
    ax.set_xlabel("prompt length (tokens)")
    ax.set_ylabel("TFLOP/s\n(causal: half the full FLOPs)")
    legend_above(ax)
    caption(ax, source)
    return fig


#: The ablation's row labels: characters a line, and the height of a line of them (inches, at the book's
#: smallest figure text with matplotlib's 1.2 line spacing, rounded up).
ABLATION_LABEL_CHARS, ABLATION_LINE_IN = 24, 0.19


def plot_ablation(table, source: str):
    """The tuned kernel built up one change at a time: TFLOP/s per step, one bar group per length."""
    steps = table.drop_duplicates("step").sort_values("step")
    lengths = sorted(table.n.unique())
    # each change on lines of at most LABEL_CHARS characters (the labels share a phone's width with the bars),
    # and each step's slot tall enough for its longest label: two labels never overlap
    labels = [textwrap.fill(c, ABLATION_LABEL_CHARS) for c in steps.change]
    lines = max(label.count("\n") + 1 for label in labels)
    slot_in = max(0.55, ABLATION_LINE_IN * lines + 0.14)
    fig, ax = figure(figsize=(WIDTH_IN, 1.6 + slot_in * len(steps)))
    height = 0.8 / len(lengths)
    for i, n in enumerate(lengths):
        rows = table[table.n == n].sort_values("step")
        ax.barh(rows.step + i * height, rows.tflops, height=height, label=f"{n // 1024}k tokens",
                color=["#e36b00", "#a06356"][i % 2])
    ax.set_yticks(steps.step + height * (len(lengths) - 1) / 2, labels)
    ax.set_ylim(steps.step.max() + 0.5 + height * (len(lengths) - 1), steps.step.min() - 0.5)
    ax.set_xlabel("TFLOP/s")
    legend_above(ax, ncol=len(lengths))
    caption(ax, source)
    return fig


def plot_decode(table, labels: dict, batches, source: str):
    """Share of the GPU's bandwidth ceiling (``pct_of_ceiling``) against context, one panel per batch size,
    stacked in one column."""
    fig, axes = figure(len(batches), 1, figsize=(WIDTH_IN, 1.6 + 2.6 * len(batches)), sharey=True, sharex=True)
    axes = np.atleast_1d(axes)
    for ax, batch in zip(axes, batches, strict=True):
        for name, label in labels.items():
            rows = table[(table.candidate == name) & (table.batch == batch) & (table.status == "ok")].sort_values("n")
            if len(rows):
                ax.plot(rows.n, rows.pct_of_ceiling, marker="o", ms=3, label=label, color=color(name))
        token_axis(ax, sorted(table.n.unique()))
        ax.set_ylabel("% of bandwidth ceiling")
        ax.set_title(f"batch {batch}", fontsize=10, loc="left")
    axes[-1].set_xlabel("cached context (tokens)")
    axes[0].set_title("", loc="left")
    legend_above(axes[0], title=f"batch {batches[0]}")  # the legend heads the top panel, so it names it
    caption(axes[-1], source)
    return fig


def plot_decode_rows(points, roof, labels: dict, source: str):
    """Decode attention against query rows per KV head: time (top) and achieved FLOP/s under the measured
    roofline (bottom), sharing an x axis (the rows are the FLOP per byte). Eagerly timed points are hollow."""
    fig, (top, bottom) = figure(2, 1, figsize=(WIDTH_IN, 6.6), sharex=True)
    for name, label in labels.items():
        mine = points[points.candidate == name].sort_values("rows")
        if mine.empty:
            continue
        tint = color(name)
        for ax, values in ((top, mine.ms), (bottom, mine.tflops)):
            ax.plot(mine.rows, values, color=tint, lw=1.2, label=label if ax is top else None)
            eager = (mine.timer == "eager").to_numpy()
            ax.scatter(mine.rows[~eager], values[~eager], s=14, color=tint, zorder=3)
            ax.scatter(mine.rows[eager], values[eager], s=18, facecolors="none", edgecolors=tint, zorder=3)
    rows = np.geomspace(points.rows.min() / 1.3, points.rows.max() * 1.3, 200)
    bottom.plot(rows, [roof.attainable(r) / 1e12 for r in rows], color="#7f7f7f", lw=1, ls="--",
                label="roofline (measured matmul rate and read ceiling)")
    bottom.axvline(roof.ridge, color="#7f7f7f", lw=0.8, ls=":")
    bottom.annotate(f"ridge\n{roof.ridge:.0f}", (roof.ridge, points.tflops.min()), textcoords="offset points",
                    xytext=(4, 0), ha="left", fontsize=9, color="#555555")
    top.set_ylim(bottom=0)
    bottom.set_yscale("log")
    plain_log_axis(bottom.yaxis)
    token_axis(bottom, sorted(points.rows.unique()))
    top.set_ylabel("ms per decode step\n(one layer)")
    bottom.set_ylabel("TFLOP/s")
    bottom.set_xlabel("query rows per KV head (≈ FLOP per byte of K/V)")
    legend_above(top, ncol=1)
    bottom.legend(loc="upper left", fontsize=9)
    caption(bottom, source)
    return fig

"""Figures for the tiling, FlashAttention-in-Triton and split-KV decode chapters."""

from __future__ import annotations

import numpy as np

from lab.book.plots import caption, color, figure


def _finish(fig, ax, source: str, bottom: float = 0.2):
    """Leave room under the axes so the source caption does not sit on the axis label."""
    fig.subplots_adjust(bottom=bottom)
    caption(ax, source)
    return fig


def _token_ticks(ax, values):
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(values), [f"{v // 1024}k" if v >= 1024 else str(v) for v in values])
    ax.minorticks_off()


def plot_tile_visits(traffic, n_q_tiles: int, n_k_tiles: int, source: str):
    """Which (query tile, key tile) pairs one head's tiled loop visited, from a TileTraffic record."""
    grid = np.zeros((n_q_tiles, n_k_tiles))
    for b, h, q_tile, k_tile, read, _ in traffic.steps:
        if b == 0 and h == 0 and k_tile >= 0:
            grid[q_tile, k_tile] += read
    fig, ax = figure(figsize=(4.6, 4.0))
    ax.imshow(grid > 0, cmap="Greys", vmin=0, vmax=1.6, origin="upper")
    ax.set_xlabel("key tile")
    ax.set_ylabel("query tile")
    ax.grid(False)
    ax.set_title("tiles the causal loop visits (dark) and skips (white)", fontsize=9)
    return _finish(fig, ax, source, bottom=0.16)


def plot_bytes_vs_length(lengths, series: dict, source: str, ylabel: str = "HBM bytes per head"):
    """Bytes moved against sequence length, one line per method (log-log)."""
    fig, ax = figure()
    for name, values in series.items():
        ax.loglog(lengths, values, marker="o", ms=3, label=name,
                  color=color("naive") if name.startswith("naive") else None)
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel(ylabel)
    ax.legend()
    return _finish(fig, ax, source)


def plot_prefill(table, labels: dict, source: str):
    """TFLOP/s against prompt length for every candidate that ran."""
    fig, ax = figure()
    for name, label in labels.items():
        rows = table[(table.candidate == name) & (table.status == "ok")].sort_values("n")
        if len(rows):
            ax.plot(rows.n, rows.tflops, marker="o", ms=3, label=label, color=color(name))
    _token_ticks(ax, sorted(table.n.unique()))
    ax.set_xlabel("prompt length (tokens)")
    ax.set_ylabel("TFLOP/s (causal: half the full FLOPs)")
    ax.legend(fontsize=8)
    return _finish(fig, ax, source)


def plot_ablation(table, source: str):
    """The tuned kernel built up one change at a time: TFLOP/s per step, one bar group per length."""
    steps = table.drop_duplicates("step").sort_values("step")
    lengths = sorted(table.n.unique())
    fig, ax = figure(figsize=(7.0, 3.6))
    height = 0.8 / len(lengths)
    for i, n in enumerate(lengths):
        rows = table[table.n == n].sort_values("step")
        ax.barh(rows.step + i * height, rows.tflops, height=height, label=f"{n // 1024}k tokens",
                color=["#ff7f0e", "#8c564b"][i % 2])
    ax.set_yticks(steps.step + height * (len(lengths) - 1) / 2, steps.change)
    ax.invert_yaxis()
    ax.set_xlabel("TFLOP/s")
    ax.legend(fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(lengths))
    return _finish(fig, ax, source, bottom=0.18)


def plot_decode(table, labels: dict, batches, source: str):
    """Share of the copy bandwidth against context, one panel per batch size."""
    fig, axes = figure(1, len(batches), figsize=(8.5, 3.6), sharey=True)
    axes = np.atleast_1d(axes)
    for ax, batch in zip(axes, batches, strict=True):
        for name, label in labels.items():
            rows = table[(table.candidate == name) & (table.batch == batch) & (table.status == "ok")].sort_values("n")
            if len(rows):
                ax.plot(rows.n, rows.bw_fraction * 100, marker="o", ms=3, label=label, color=color(name))
        _token_ticks(ax, sorted(table.n.unique())[::2])
        ax.set_xlabel("cached context (tokens)")
        ax.set_title(f"batch {batch}", fontsize=9)
    axes[0].set_ylabel("% of copy bandwidth")
    axes[-1].legend(fontsize=7)
    return _finish(fig, axes[0], source, bottom=0.2)

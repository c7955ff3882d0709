"""Chapter 2's picture of the hardware counters: how busy each prefill kernel kept the tensor pipe, the XU pipe
and DRAM."""

from __future__ import annotations

import textwrap

import numpy as np

from lab.book.plots import WIDTH_IN, caption, figure, legend_above

#: (row key of lab.book.pages.ch02.prefill_rows, legend label, colour)
BARS = (("tensor_pct", "tensor pipe busy", "#1f77b4"), ("xu_pct", "XU pipe (exponentials)", "#ff7f0e"),
        ("rate_pct", "DRAM traffic, % of the read ceiling", "#7f7f7f"))


def plot_prefill_counters(rows: list[dict], source: str):
    """Three bars per kernel (one row each, the measured ones only): tensor pipe and XU pipe busy, and DRAM
    traffic per second as a share of the GPU's read ceiling, all in percent."""
    rows = [row for row in rows if row["tensor_pct"] is not None]
    fig, ax = figure(figsize=(WIDTH_IN, 2.0 + 0.75 * max(len(rows), 1)))
    height = 0.8 / len(BARS)
    y = np.arange(len(rows))
    for i, (key, label, colour) in enumerate(BARS):
        ax.barh(y + i * height, [row[key] for row in rows], height=height, label=label, color=colour)
    # each kernel's name on lines of at most 18 characters: the names share a phone's width with the bars
    ax.set_yticks(y + height * (len(BARS) - 1) / 2, [textwrap.fill(row["kernel"], 18) for row in rows])
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("% (of peak, or of the read ceiling)")
    legend_above(ax)
    caption(ax, source)
    return fig

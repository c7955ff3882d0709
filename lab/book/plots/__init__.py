"""One look for every figure in the book. Topic-specific plots live in ``lab.book.plots.<topic>``.

Every figure says which GPU and engine its numbers came from: pass that as ``source``
to :func:`caption` so it is written under the axes.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg") if not matplotlib.get_backend().lower().startswith(("module://", "nbagg", "ipympl", "widget")) else None
import matplotlib.pyplot as plt  # noqa: E402

# Resolve the backend now, outside any rc_context: in Jupyter, loading the inline backend switches
# interactive mode on, and if that first happened inside figure()'s rc_context it would be undone on
# exit and no later figure would display.
plt.switch_backend(plt.rcParams["backend"])

#: A fixed colour per attention backend or kernel, so the same thing looks the same in every chapter.
COLORS = {
    "FLASH_ATTN": "#1f77b4",
    "FLASH_ATTN/FA3": "#1f77b4",
    "FLASH_ATTN/FA2": "#17becf",
    "FLEX_ATTENTION": "#d62728",
    "TRITON_ATTN": "#9467bd",
    "naive": "#7f7f7f",
    "sdpa-flash": "#1f77b4",
    "sdpa-cudnn": "#2ca02c",
    "flex": "#d62728",
    "ours-teaching": "#ff7f0e",
    "ours-tuned": "#8c564b",
    "attention": "#d62728",
    "matmul": "#1f77b4",
    "other": "#bbbbbb",
}

STYLE = {
    "figure.figsize": (7.0, 4.0),
    "figure.dpi": 110,
    "savefig.dpi": 110,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "font.size": 10,
    "legend.frameon": False,
}


def color(name: str) -> str:
    """Colour for a backend/kernel/family name; unknown names get a stable colour from the cycle."""
    if name in COLORS:
        return COLORS[name]
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    return cycle[sum(map(ord, name)) % len(cycle)]


def figure(nrows: int = 1, ncols: int = 1, **kwargs):
    """A new figure in the book's style: ``fig, ax = figure()``."""
    with plt.rc_context(STYLE):
        return plt.subplots(nrows, ncols, **kwargs)


def caption(ax, source: str) -> None:
    """Write where the numbers came from (GPU, engine, dataset) under the axes."""
    ax.annotate(source, xy=(0, 0), xycoords="figure fraction", xytext=(6, 4), textcoords="offset points",
                fontsize=7, color="#555555", ha="left", va="bottom")

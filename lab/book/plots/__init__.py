"""One look for every figure in the book. Topic-specific plots live in ``lab.book.plots.<topic>``.

Every figure says which GPU and engine its numbers came from: pass that as ``source``
to :func:`caption` so it is written under the axes.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg") if not matplotlib.get_backend().lower().startswith(("module://", "nbagg", "ipympl", "widget")) else None
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.text  # noqa: E402

# Resolve the backend now, outside any rc_context: in Jupyter, loading the inline backend switches
# interactive mode on, and if that first happened inside figure()'s rc_context it would be undone on
# exit and no later figure would display.
plt.switch_backend(plt.rcParams["backend"])

#: A fixed colour per attention backend or kernel, so the same thing looks the same in every chapter.
COLORS = {
    "FLASH_ATTN": "#1f77b4",
    "FLASH_ATTN/FA3": "#1f77b4",
    "FLASH_ATTN/FA2": "#ff7f0e",  # orange beside FA3's blue: two versions of one kernel, told apart at a glance
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


#: Colours handed to names without a fixed colour, in order, skipping any already used in the figure.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf", "#393b79", "#637939")


def distinct_colors(names, fixed: dict | None = None) -> dict:
    """name -> colour for one figure: fixed colours first (``fixed``, then :data:`COLORS`), the rest
    from :data:`PALETTE` with no colour used twice (so e.g. 'naive softmax' never shares a red)."""
    fixed = dict(fixed or {})
    out = {n: fixed.get(n, COLORS.get(n)) for n in names}
    used = {c.lower() for c in out.values() if c}
    for n in names:
        if out[n] is None:
            out[n] = next((c for c in PALETTE if c.lower() not in used), color(n))
            used.add(out[n].lower())
    return out


#: The smallest text a reader meets in a figure, in CSS pixels, as shown in the page's content column.
MIN_TEXT_PX = 9.0
#: The content column's width at 1366 px (sphinx-book-theme); a wider PNG is scaled down to it.
#: tests/test_browser.py checks that no figure is shown narrower than this assumes.
COLUMN_PX = 720


def min_font_pt(width_in: float, dpi: float) -> float:
    """Smallest font (points) that is MIN_TEXT_PX on the page for a PNG ``width_in`` inches wide at ``dpi``."""
    shown_px_per_pt = min(dpi, COLUMN_PX / width_in) / 72.0
    return MIN_TEXT_PX / shown_px_per_pt


def _legible(fig):
    """Raise any text below :func:`min_font_pt` just before the figure is drawn (every save goes through it)."""
    draw = fig.draw

    def draw_legibly(renderer):
        try:
            width = max(fig.get_figwidth(), fig.get_tightbbox(renderer).width)
        except Exception:  # noqa: BLE001  (an empty or odd figure: its own width is good enough)
            width = fig.get_figwidth()
        floor = min_font_pt(width * 1.03, fig.dpi)
        for text in fig.findobj(matplotlib.text.Text):
            if text.get_text() and text.get_fontsize() < floor:
                text.set_fontsize(floor)
        return draw(renderer)

    fig.draw = draw_legibly
    return fig


def figure(nrows: int = 1, ncols: int = 1, **kwargs):
    """A new figure in the book's style: ``fig, ax = figure()``. No text in it is drawn below MIN_TEXT_PX."""
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(nrows, ncols, **kwargs)
    _legible(fig)
    return fig, axes


def caption(ax, source: str) -> None:
    """Write where the numbers came from (GPU, engine, dataset) under the axes."""
    # wrapped at the figure's edge: text raised to a legible size (see _legible) is never cut off
    ax.annotate(source, xy=(0, 0), xycoords="figure fraction", xytext=(6, 4), textcoords="offset points",
                fontsize=7, color="#555555", ha="left", va="bottom", wrap=True)

"""One look for every figure in the book. Topic-specific plots live in ``lab.book.plots.<topic>``.

Every figure says which GPU and engine its numbers came from: pass that as ``source``
to :func:`caption` so it is written under the axes.
"""

from __future__ import annotations

import os

import matplotlib
import math
import math
from matplotlib.font_manager import FontProperties
from matplotlib.textpath import text_to_path
from matplotlib.ticker import FuncFormatter
from matplotlib.lines import Line2D

matplotlib.use("Agg") if not matplotlib.get_backend().lower().startswith(("module://", "nbagg", "ipympl", "widget")) else None
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.text  # noqa: E402
import matplotlib.ticker  # noqa: E402
import matplotlib.transforms  # noqa: E402

from lab.book.plots.alt_text import ALT_KEY, describe  # noqa: E402
from lab.measure.vllm import arms  # noqa: E402
from lab.names import CANDIDATES  # noqa: E402
from lab.units import SI_PREFIXES  # noqa: E402

# Resolve the backend now, outside any rc_context: in Jupyter, loading the inline backend switches
# interactive mode on, and if that first happened inside figure()'s rc_context it would be undone on
# exit and no later figure would display.
plt.switch_backend(plt.rcParams["backend"])

#: Colours handed to names without a fixed colour, in order, skipping any already used in the figure. Every
#: colour here and in :data:`COLORS` (near-black ones aside: the explorers draw those in the text colour) keeps
#: 3:1 contrast against a white chart and against the explorers' dark one (#1f2227): a relative luminance
#: between 0.15 and 0.30 (tab10's orange, pink, olive and cyan were too light, its brown too dark).
PALETTE = ("#1f77b4", "#e36b00", "#2ca02c", "#d62728", "#9467bd", "#a06356", "#de5eb7", "#7f7f7f", "#91921a",
           "#139caa", "#696cb8", "#637939")

#: A fixed colour per attention backend, kernel (lab.names.CANDIDATES) and census family, so the same thing looks
#: the same in every chapter.
COLORS = {
    arms.FLASH.label: "#1f77b4",
    arms.FA3.label: "#1f77b4",
    arms.FA2.label: "#e36b00",  # orange beside FA3's blue: two versions of one kernel, told apart at a glance
    arms.FLEX.label: "#d62728",
    arms.TRITON.label: "#9467bd",
    arms.FA3_FP8.label: "#139caa",  # cyan beside FA3's blue: the same kernel reading an FP8 cache
    **{name.id: name.colour for name in CANDIDATES.values()},  # every kernel candidate (lab.names)
    "attention": "#d62728",
    "matmul": "#1f77b4",
    "other": "#8d8d8d",
}

#: Figures are designed phone-first: this wide (inches), one column of panels, legends above the axes.
WIDTH_IN = 5.0

STYLE = {
    "figure.figsize": (WIDTH_IN, 3.6),
    "figure.dpi": 110,
    "savefig.dpi": 110,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "font.size": 10,
    "legend.frameon": False,
    "axes.prop_cycle": matplotlib.cycler(color=PALETTE),
}


def color(name: str) -> str:
    """Colour for a backend/kernel/family name; unknown names get a stable colour from :data:`PALETTE`."""
    if name in COLORS:
        return COLORS[name]
    return PALETTE[sum(map(ord, name)) % len(PALETTE)]


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
#: How wide a figure is shown on a 390x844 phone, in CSS px, measured in chromium on the built site
#: (tests/test_browser.py prints it): the content column is 358 px (sphinx-book-theme; 757 px at
#: 1366x900) and a cell output's image gets 342 px of it. A wider PNG is scaled down to this, so a
#: figure's text is smallest on a phone; a floor that holds there holds on every wider screen too.
PHONE_COLUMN_PX = 342
#: matplotlib's mathtext draws sub- and superscripts at 0.7 of the font size (mathtext's SHRINK_FACTOR);
#: text with them is held to the floor at that size. The book's tick formatters avoid mathtext anyway.
SCRIPT_SHRINK = 0.7
#: The PNG text chunk every figure carries: the smallest text drawn in it, in image pixels.
PNG_TEXT_KEY = "lab-min-text-px"


def min_font_pt(width_in: float, dpi: float) -> float:
    """Smallest font (points) that is MIN_TEXT_PX on a phone for a PNG ``width_in`` inches wide at ``dpi``."""
    shown_px_per_pt = min(dpi, PHONE_COLUMN_PX / width_in) / 72.0
    return MIN_TEXT_PX / shown_px_per_pt


def _texts(fig) -> list:
    return [t for t in fig.findobj(matplotlib.text.Text) if t.get_text()]


def drawn_scale(text) -> float:
    """How big the smallest glyphs of ``text`` are against its font size (sub/superscripts are smaller)."""
    s = text.get_text()
    math = text.get_usetex() or (s.count("$") - s.count(r"\$") >= 2)
    return SCRIPT_SHRINK if math and ("^" in s or "_" in s) else 1.0


def smallest_text_pt(fig) -> float:
    """The smallest text in ``fig`` as drawn (points), sub/superscripts counted at their drawn size."""
    return min((t.get_fontsize() * drawn_scale(t) for t in _texts(fig)), default=float("inf"))


def _raise_text(fig, floor_pt: float) -> None:
    for text in _texts(fig):
        need = floor_pt / drawn_scale(text)
        if text.get_fontsize() < need:
            text.set_fontsize(need)


def _png_width_in(fig, bbox_inches, pad_inches) -> float:
    """How wide (inches) the saved image is: the figure, or its tight box plus padding."""
    if bbox_inches is None:
        bbox_inches = matplotlib.rcParams["savefig.bbox"]
    if bbox_inches is None or bbox_inches == "standard":
        return fig.get_figwidth()
    if bbox_inches != "tight":
        return bbox_inches.width
    pad = pad_inches if pad_inches is not None else matplotlib.rcParams["savefig.pad_inches"]
    pad = pad if isinstance(pad, (int, float)) else 0.1
    try:
        return fig.get_tightbbox(fig.canvas.get_renderer()).width + 2 * pad
    except Exception:  # noqa: BLE001  (a canvas without a renderer: the figure's own width)
        return fig.get_figwidth() + 2 * pad


def _image_format(fname, kwargs) -> str:
    fmt = kwargs.get("format")
    if fmt is None and isinstance(fname, (str, os.PathLike)):
        fmt = os.path.splitext(os.fspath(fname))[1][1:]
    return (fmt or matplotlib.rcParams["savefig.format"]).lower()


def _legible(fig):
    """Hold every text in ``fig`` to the phone floor and label every PNG it writes with its smallest text.

    Drawing raises any text below :func:`min_font_pt` (for the figure's width, or its tight box if wider).
    Printing (``savefig`` and the Jupyter inline backend both call ``fig.canvas.print_figure``) first
    fits the text to the exact width of the image being written, then writes :data:`PNG_TEXT_KEY` into
    the PNG, so a test can check the text as shown on the page, and the figure's alt text
    (:mod:`lab.book.plots.alt_text`).
    """
    draw, print_figure = fig.draw, fig.canvas.print_figure
    printing = []  # non-empty while print_legibly runs: its floor, for the exact image width, is the one

    def draw_legibly(renderer):
        if printing:
            return draw(renderer)
        try:
            width = max(fig.get_figwidth(), fig.get_tightbbox(renderer).width) + 0.2
        except Exception:  # noqa: BLE001  (an empty or odd figure: its own width is good enough)
            width = fig.get_figwidth() + 0.2
        _raise_text(fig, min_font_pt(width, fig.dpi))
        return draw(renderer)

    def print_legibly(fname, *args, **kwargs):
        if _image_format(fname, kwargs) != "png":
            return print_figure(fname, *args, **kwargs)
        dpi = kwargs.get("dpi") or matplotlib.rcParams["savefig.dpi"]
        dpi = fig.dpi if dpi == "figure" else float(dpi)
        printing.append(dpi)
        try:
            for _ in range(5):  # raised text can widen the image, which shrinks it more on a phone: settle it
                fig.draw_without_rendering()
                floor = min_font_pt(_png_width_in(fig, kwargs.get("bbox_inches"), kwargs.get("pad_inches")), dpi)
                if smallest_text_pt(fig) >= floor - 1e-6:
                    break
                _raise_text(fig, floor)
            least_px = smallest_text_pt(fig) * dpi / 72.0
            kwargs["metadata"] = {**(kwargs.get("metadata") or {}), ALT_KEY: describe(fig)}  # the page's alt text
            if least_px != float("inf"):
                kwargs["metadata"][PNG_TEXT_KEY] = f"{least_px:.3f}"
            return print_figure(fname, *args, **kwargs)
        finally:
            printing.pop()

    fig.draw = draw_legibly
    fig.canvas.print_figure = print_legibly
    return fig


def figure(nrows: int = 1, ncols: int = 1, **kwargs):
    """A new figure in the book's style: ``fig, ax = figure()``. No text in it is drawn below MIN_TEXT_PX.

    Laid out by matplotlib's constrained layout (legends, titles and the caption get their room at draw
    time, after any text was raised), so plot functions call neither tight_layout nor subplots_adjust.
    """
    kwargs.setdefault("layout", "constrained")
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(nrows, ncols, **kwargs)
    _legible(fig)
    return fig, axes


def floor_pt(fig_or_width, dpi: float | None = None) -> float:
    """The smallest font (points) text may have in a figure (or one ``fig_or_width`` inches wide, at the
    book's dpi), a hair above the floor: what plot functions give their smallest text."""
    if isinstance(fig_or_width, (int, float)):
        width, dpi = float(fig_or_width), dpi or STYLE["figure.dpi"]
    else:
        width, dpi = fig_or_width.get_figwidth(), fig_or_width.dpi
    return round(min_font_pt(width + 0.2, dpi) + 0.05, 1)


def wrap_to_width(text: str, fontsize: float, width_in: float) -> str:
    """``text`` broken at spaces into lines no wider than ``width_in`` inches at ``fontsize`` points."""
    lines: list[str] = []
    for paragraph in text.split("\n"):
        line = ""
        for word in paragraph.split(" "):
            candidate = f"{line} {word}" if line else word
            if line and text_width_in(candidate, fontsize) > width_in:
                lines.append(line)
                line = word
            else:
                line = candidate
        lines.append(line)
    return "\n".join(lines)


def caption(ax, source: str) -> None:
    """Write where the numbers came from (GPU, engine, dataset) under everything else in the figure."""
    fig = ax.figure
    size = floor_pt(fig)
    # broken into lines here, so the layout knows the caption's true height and it never runs off the edge
    fig.supxlabel(wrap_to_width(source, size, fig.get_figwidth() - 0.4), x=0.01, ha="left", fontsize=size,
                  color="#555555")


def text_width_in(text: str, fontsize: float) -> float:
    """How wide ``text`` is (inches) at ``fontsize`` points, its widest line."""
    prop = FontProperties(size=fontsize)
    return max(text_to_path.get_text_width_height_descent(line, prop, ismath=False)[0] for line in text.split("\n")) / 72


def legend_above(ax, title: str | None = None, **kwargs):
    """A legend on top of the axes, left-aligned: it never covers data and fits a phone.

    Two columns when every entry is short enough for two to fit the figure's width, else one.
    ``title`` (what would be the axes title) heads it, so panels stacked in one column stay labelled.
    """
    kwargs.setdefault("fontsize", floor_pt(ax.figure))
    if title:
        kwargs.setdefault("title_fontsize", max(kwargs["fontsize"], 10))
    if "ncol" not in kwargs:
        labels = [h.get_label() for h in kwargs["handles"]] if "handles" in kwargs else ax.get_legend_handles_labels()[1]
        widest = max((text_width_in(label, kwargs["fontsize"]) for label in labels), default=0.0)
        kwargs["ncol"] = 2 if len(labels) > 2 and 2 * (widest + 0.55) < ax.figure.get_figwidth() - 0.2 else 1
    # left edge at the figure's left, bottom on the axes' top: the legend may use the figure's full width
    anchor = matplotlib.transforms.blended_transform_factory(ax.figure.transFigure, ax.transAxes)
    return ax.legend(loc="lower left", bbox_to_anchor=(0.01, 1.01), bbox_transform=anchor, borderaxespad=0.0,
                     alignment="left", title=title, **kwargs)


def compact_number(value: float, unit: str = "") -> str:
    """Tick text without mathtext: 0.01, 1, 100, 10k, 1M, 1.5T (SI prefixes), then ``unit``."""
    magnitude = abs(value)
    scale, prefix = next(((f, p) for f, p in SI_PREFIXES if magnitude >= f), (1.0, ""))
    return f"{value / scale:g}{prefix}{unit}"


def plain_log_axis(axis, unit: str = "", tokens: bool = False) -> None:
    """Label a log axis with plain text ticks (no 10^x mathtext, whose exponents are drawn 0.7x small).

    ``tokens``: powers of two as 512, 1k, 32k (k = 1024), as the book writes token counts. An axis
    spanning less than two decades also labels its 2s and 5s, so it never shows a single tick.
    """
    def major(v, _pos):
        return token_label(v) if tokens else compact_number(v, unit)

    def minor(v, _pos):
        lo, hi = sorted(axis.get_view_interval())
        lead = round(v / 10 ** math.floor(math.log10(v) + 1e-9)) if v > 0 else 0
        return compact_number(v, unit) if lo > 0 and hi / lo < 100 and lead in (2, 5) else ""

    axis.set_major_formatter(FuncFormatter(major))
    axis.set_minor_formatter(FuncFormatter(lambda v, _pos: "" if tokens else minor(v, _pos)))


def token_label(value: float) -> str:
    """A token count as the book writes it on an axis: 256, 1k, 32k (k = 1024)."""
    return f"{value / 1024:g}k" if value >= 1024 else f"{value:g}"


def token_axis(ax, values, max_ticks: int = 6, axis: str = "x") -> None:
    """A log-2 token axis over ``values``: ticks at powers of two (every other one if crowded), as 1k, 32k."""
    lo, hi = min(values), max(values)
    ticks = [2 ** k for k in range(math.floor(math.log2(lo)), math.ceil(math.log2(hi)) + 1)]
    ticks = [t for t in ticks if lo / 1.5 <= t <= hi * 1.5]
    step = max(1, math.ceil(len(ticks) / max_ticks))
    ticks = ticks[len(ticks) % step - 1 if len(ticks) % step else 0::step] if step > 1 else ticks
    target = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log", base=2)
    target.set_ticks(ticks, [token_label(t) for t in ticks])
    target.set_minor_locator(matplotlib.ticker.NullLocator())


def style_legend(ax, groups: dict, styles: dict, **kwargs):
    """One legend that names colours and line styles apart (``groups``: label -> colour; ``styles``:
    label -> Line2D keywords), instead of one long entry per line: short rows that fit a phone."""
    handles = [Line2D([], [], color=c, lw=2.5, label=label) for label, c in groups.items()]
    handles += [Line2D([], [], color="#555555", label=label, **kw) for label, kw in styles.items()]
    return legend_above(ax, handles=handles, **kwargs)

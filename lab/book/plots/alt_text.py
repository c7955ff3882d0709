"""A figure's alt text, in its own words: what each panel plots against what, its series, its source.

    "Chart. Panel 'prefill': time to first token (s) against prompt length (tokens); series: FLASH_ATTN,
     FLEX_ATTENTION, roofline floor. Source: NVIDIA A10G, vLLM 0.11.0, ..."

Every PNG a book figure writes carries this sentence in its :data:`ALT_KEY` text chunk (lab.book.plots'
printing adds it beside the smallest-text chunk), and the site and the slide decks take it for the
image's alt attribute (lab.book.sphinxext, lab.book.slides): a screen reader says what the figure shows,
not its file name. Being read from the figure at the moment it is written, it cannot drift from it.
"""

from __future__ import annotations

import io
import re

#: The PNG text chunk with the figure's alt text.
ALT_KEY = "lab-alt"
#: Text labels a diagram (a figure without axis labels) is described by, at most.
MAX_LABELS = 10


def _plain(text: str) -> str:
    """Matplotlib text as a reader hears it: mathtext's $ and backslashes dropped, lines joined."""
    text = re.sub(r"\\(mathrm|text|mathit|mathbf)\{([^}]*)\}", r"\2", text or "")
    return " ".join(text.replace("$", "").replace("\\", "").replace("{", "").replace("}", "").split())


def _legend_names(legend) -> list[str]:
    return [_plain(t.get_text()) for t in legend.get_texts() if _plain(t.get_text())] if legend else []


def _categories(ticks) -> list[str]:
    """Tick labels that name things (bars, kernels, windows), not numbers; [] for a numeric axis."""
    names = [_plain(t.get_text()) for t in ticks if _plain(t.get_text())]
    named = [n for n in names if not re.fullmatch(r"[-+−\d.,%×x ]*[kKMGTµmn]?[a-zA-Z/%]{0,3}", n)]
    return named[:MAX_LABELS] if named and len(named) >= len(names) / 2 else []


def _shared_label(ax, axis: str) -> str:
    """The axis' label, or where it has none, the label of an axes it shares that axis with (stacked panels
    name their shared x axis once, under the last)."""
    own = _plain(getattr(ax, f"get_{axis}label")())
    if own:
        return own
    shared = ax.get_shared_x_axes() if axis == "x" else ax.get_shared_y_axes()
    labels = [_plain(getattr(other, f"get_{axis}label")()) for other in shared.get_siblings(ax) if other is not ax]
    return next((label for label in labels if label), "")


def _panel(ax) -> str:
    """One panel: its name, what it plots, its series; '' for an empty or hidden axes."""
    if not ax.get_visible():
        return ""
    legend = ax.get_legend()
    name = _plain(ax.get_title()) or _plain(ax.get_title(loc="left")) or (_plain(legend.get_title().get_text())
                                                                           if legend else "")
    x, y = _shared_label(ax, "x"), _shared_label(ax, "y")
    x_names, y_names = _categories(ax.get_xticklabels()), _categories(ax.get_yticklabels())
    if y_names and not y:  # horizontal bars: a quantity for each named row
        what = f"{x or 'values'} for {', '.join(y_names)}"
    elif x_names and not x:  # bars or points over named columns
        what = f"{y or 'values'} for {', '.join(x_names)}"
    elif x or y:
        what = f"{y or 'values'} against {x or 'position'}"
    else:
        labels = [_plain(t.get_text()) for t in ax.texts if _plain(t.get_text())]
        if not labels:
            return ""
        what = "a diagram labelled " + ", ".join(labels[:MAX_LABELS]) + (", ..." if len(labels) > MAX_LABELS else "")
    series = _legend_names(legend)
    return (f"Panel '{name}': " if name else "") + what + (f"; series: {', '.join(series)}" if series else "")


def describe(fig) -> str:
    """The alt text of ``fig``: a sentence per panel, the figure-wide legend, and the source line."""
    panels = [p for p in (_panel(ax) for ax in fig.axes) if p]
    shared = [n for legend in getattr(fig, "legends", []) for n in _legend_names(legend)]
    words = ["Figure." if all("a diagram labelled" in p for p in panels) else "Chart."]
    words += [p + "." for p in panels]
    if shared:
        words.append(f"Series: {', '.join(shared)}.")
    title = getattr(fig, "_suptitle", None)
    source = getattr(fig, "_supxlabel", None)
    if title is not None and _plain(title.get_text()):
        words.insert(1, _plain(title.get_text()) + ".")
    if source is not None and _plain(source.get_text()):
        words.append(f"Source: {_plain(source.get_text())}")
    return " ".join(words)


def png_alt(data: bytes) -> str | None:
    """The alt text a PNG carries (:data:`ALT_KEY`), or None."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as image:
            return (getattr(image, "text", None) or {}).get(ALT_KEY)
    except OSError:  # not an image PIL can read: no alt text to offer
        return None

"""Census figures: stacked bars of attention / matmul / other GPU time per profiler window."""

from __future__ import annotations

from matplotlib.ticker import MaxNLocator

from lab.book.plots import WIDTH_IN, caption, color, figure, floor_pt
from lab.measure.census import FAMILIES
import matplotlib.patches as mpatches

UNBROKEN = "not broken down"


def _bars(ax, windows, unit_scale: float) -> set[str]:
    """Draw one stacked bar per window on ``ax``; return the legend entries used."""
    used = set()
    for i, w in enumerate(windows):
        left = 0.0
        for fam in FAMILIES:
            value = w.ms.get(fam)
            if not value:       # None (not published) or 0 (e.g. no collectives on one GPU): no segment
                continue
            ax.barh(i, value * unit_scale, left=left, color=color(fam), edgecolor="white", height=0.7)
            left += value * unit_scale
            used.add(fam)
        if w.window_ms is not None and w.window_ms * unit_scale > left * 1.001:
            ax.barh(i, w.window_ms * unit_scale - left, left=left, color="none", edgecolor="#8d8d8d",
                    hatch="///", height=0.7)
            used.add(UNBROKEN)
    ax.set_yticks(range(len(windows)), [w.backend for w in windows])
    ax.xaxis.set_major_locator(MaxNLocator(nbins=4))  # a few short ticks: the panel is a phone's width
    ax.set_ylim(len(windows) - 0.5, -0.5)
    return used


def plot_census_panels(groups: dict, source: str, seconds_above_ms: float = 2000.0):
    """One panel per window kind (e.g. "prefill 28k"), one stacked bar per backend, own x scale, one unit.

    ``groups`` maps a panel title to a list of :class:`lab.results.census_windows.WindowCensus`; windows with
    no data are left out and a panel with none says so. A window whose total is known but whose
    split is only partly published gets a hatched "not broken down" segment for the rest, so the
    bar keeps its true length.
    """
    titles = list(groups)
    fig, axes = figure(len(titles), 1, figsize=(WIDTH_IN, 1.45 * len(titles) + 1.2), squeeze=False)
    small = floor_pt(fig)
    used: set[str] = set()
    # One unit for every panel (a reader compares the panels): seconds if any window runs past the threshold.
    known = [w for title in titles for w in groups[title] if w.known]
    seconds = any((w.window_ms or sum(v or 0 for v in w.ms.values())) > seconds_above_ms for w in known)
    for ax, title in zip(axes[:, 0], titles, strict=True):
        windows = [w for w in groups[title] if w.known]
        if not windows:
            ax.set_axis_off()
            ax.text(0.0, 0.5, f"{title}: no data", transform=ax.transAxes, fontsize=max(small, 10), color="#777777")
            continue
        used |= _bars(ax, windows, 1e-3 if seconds else 1.0)
        ax.set_title(title, fontsize=10, loc="left")
        ax.set_xlabel("GPU time (s)" if seconds else "GPU time (ms)", fontsize=small, labelpad=1)
        ax.xaxis.set_label_coords(1.045, -0.08)
    handles = [mpatches.Patch(color=color(f), label=f) for f in FAMILIES if f in used]
    if UNBROKEN in used:
        handles.append(mpatches.Patch(facecolor="none", edgecolor="#8d8d8d", hatch="///", label=UNBROKEN))
    fig.legend(handles=handles, loc="outside upper left", fontsize=small, ncol=min(len(handles), 3))
    caption(axes[-1, 0], source)
    return fig

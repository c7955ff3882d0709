"""Roofline figures: one device's two roofs with kernels placed on them, or several devices side by side."""

from __future__ import annotations

import math

import numpy as np

from lab.book.plots import caption, color, distinct_colors, figure
from lab.results.roofline import Kernel, Roof


def _intensity_range(roofs, kernels) -> tuple[float, float]:
    points = [k.intensity for k in kernels if math.isfinite(k.intensity) and k.intensity > 0]
    points += [r.ridge for r in roofs]
    return min(points + [1.0]) / 3, max(points + [1e3]) * 3


def plot_roofline(roofs: Roof | list[Roof], kernels: list[Kernel] = (), source: str = "", ax=None,
                  title: str | None = None):
    """Log-log roofline: attainable FLOP/s vs arithmetic intensity; kernels as labelled points on the first roof.

    A kernel sits on its device's roof at min(peak, intensity × bandwidth): the best it could do.
    Kernels with no HBM traffic (infinite intensity) are left out.
    """
    roofs = [roofs] if isinstance(roofs, Roof) else list(roofs)
    if ax is None:
        _, ax = figure()
    lo, hi = _intensity_range(roofs, kernels)
    xs = np.geomspace(lo, hi, 400)
    for i, r in enumerate(roofs):
        style = "-" if i == 0 else "--"
        ys = np.minimum(r.peak_flops, xs * r.bandwidth)
        line, = ax.plot(xs, ys, style, lw=2 if i == 0 else 1.2, color=color(r.name),
                        label=f"{r.name} ({r.dtype}): ridge {r.ridge:,.0f} FLOP/B")
        ax.axvline(r.ridge, color=line.get_color(), lw=0.6, ls=":")
    main = roofs[0]
    # Both legends sit to the right of the axes, so no label covers a roof or a point.
    roof_legend = ax.legend(loc="lower left", bbox_to_anchor=(1.01, 0.0), fontsize=7, title="roof", title_fontsize=7)
    finite = [k for k in kernels if math.isfinite(k.intensity) and k.intensity > 0]
    markers = "osD^vP*Xh"
    handles = []
    colors = distinct_colors([k.name for k in finite], fixed={r.name: color(r.name) for r in roofs})
    for i, k in enumerate(sorted(finite, key=lambda k: k.intensity)):
        kind = k.bound(main)
        handle, = ax.plot([k.intensity], [main.attainable(k.intensity)], markers[i % len(markers)], ms=7,
                          color=colors[k.name], mec="black", mew=0.6,
                          label=f"{k.name}: {k.intensity:,.3g} FLOP/B, {kind}-bound")
        handles.append(handle)
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7,
                  title=f"kernels on {main.name}", title_fontsize=7)
        ax.add_artist(roof_legend)
    ax.figure.set_size_inches(10.0, 4.2)
    ax.figure.subplots_adjust(right=0.6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte of device memory traffic)")
    ax.set_ylabel("attainable FLOP/s")
    ax.set_xlim(lo, hi)
    top = max(r.peak_flops for r in roofs)
    ax.set_ylim(min(r.bandwidth * lo for r in roofs) / 2, top * 3)
    if title:
        ax.set_title(title, fontsize=10)
    if source:
        ax.figure.subplots_adjust(bottom=0.2)
        caption(ax, source)
    return ax

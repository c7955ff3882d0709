"""Roofline figures: one device's two roofs with kernels placed on them, or several devices side by side."""

from __future__ import annotations

import math

import numpy as np

from lab.book.plots import (
    WIDTH_IN,
    caption,
    color,
    distinct_colors,
    figure,
    floor_pt,
    legend_above,
    plain_log_axis,
    wrap_to_width,
)
from lab.results.roofline import Kernel, Roof


def _intensity_range(roofs, kernels) -> tuple[float, float]:
    points = [k.intensity for k in kernels if math.isfinite(k.intensity) and k.intensity > 0]
    points += [r.ridge for r in roofs]
    return min(points + [1.0]) / 3, max(points + [1e3]) * 3


def intensity_text(intensity: float) -> str:
    """An intensity as the prose writes it: whole FLOP/B with thousands separators from 100 up, three significant
    digits below (no exponent form: 2,115, not 2.12e+03)."""
    return f"{intensity:,.0f}" if intensity >= 100 else f"{intensity:.3g}"


def plot_roofline(roofs: Roof | list[Roof], kernels: list[Kernel] = (), source: str = "", ax=None,
                  title: str | None = None):
    """Log-log roofline: attainable FLOP/s vs arithmetic intensity; kernels as labelled points on the first roof.

    A kernel sits on its device's roof at min(peak, intensity × bandwidth): the best it could do.
    Kernels with no HBM traffic (infinite intensity) are left out.
    """
    roofs = [roofs] if isinstance(roofs, Roof) else list(roofs)
    if ax is None:
        _, ax = figure()
    fig = ax.figure
    fig.set_size_inches(WIDTH_IN, 7.0)  # phone-first: the legend above the axes, the caption under them
    small = floor_pt(fig)
    lo, hi = _intensity_range(roofs, kernels)
    xs = np.geomspace(lo, hi, 400)
    handles = []
    for i, r in enumerate(roofs):
        style = "-" if i == 0 else "--"
        ys = np.minimum(r.peak_flops, xs * r.bandwidth)
        line, = ax.plot(xs, ys, style, lw=2 if i == 0 else 1.2, color=color(r.name),
                        label=f"{r.name} ({r.dtype}): ridge {r.ridge:,.0f} FLOP/B")
        ax.axvline(r.ridge, color=line.get_color(), lw=0.6, ls=":")
        handles.append(line)
    main = roofs[0]
    finite = [k for k in kernels if math.isfinite(k.intensity) and k.intensity > 0]
    markers = "osD^vP*Xh"
    colors = distinct_colors([k.name for k in finite], fixed={r.name: color(r.name) for r in roofs})
    for i, k in enumerate(sorted(finite, key=lambda k: k.intensity)):
        kind = k.bound(main)
        label = f"{k.name}: {intensity_text(k.intensity)} FLOP/B, {kind}-bound"
        handle, = ax.plot([k.intensity], [main.attainable(k.intensity)], markers[i % len(markers)], ms=7,
                          color=colors[k.name], mec="black", mew=0.6,
                          label=wrap_to_width(label, small, WIDTH_IN - 0.8))
        handles.append(handle)
    # One legend, above the axes (no label covers a roof or a point): the roofs, then the kernels.
    legend_above(ax, handles=handles, ncol=1,
                 title=f"roofs; kernels placed on {main.name}" if finite else "roofs")
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain_log_axis(ax.xaxis)
    plain_log_axis(ax.yaxis)
    ax.set_xlabel("arithmetic intensity\n(FLOP per byte of device memory traffic)")
    ax.set_ylabel("attainable FLOP/s")
    ax.set_xlim(lo, hi)
    top = max(r.peak_flops for r in roofs)
    ax.set_ylim(min(r.bandwidth * lo for r in roofs) / 2, top * 3)
    if title:
        if len(fig.axes) == 1:
            fig.suptitle(wrap_to_width(title, 11, WIDTH_IN - 0.3), fontsize=11)
        else:
            ax.set_title(title, fontsize=10)
    if source:
        caption(ax, source)
    return ax

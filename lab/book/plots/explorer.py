"""Draw an explorer's :class:`lab.book.explorer.View` with matplotlib (the live face in Jupyter).

The static face draws the same View as SVG in ``book/_static/explorer.js``; both read the
same fields (series kind, dash, colour, log axes, explicit ticks, marker), so they agree.
"""

from __future__ import annotations

from matplotlib.ticker import FuncFormatter

from lab.book.plots import caption, figure, floor_pt, legend_above


def tick_label(value: float) -> str:
    """Compact tick text (16384, 250k, 1.5M), the same rule explorer.js uses: token counts stay exact."""
    magnitude = abs(value)
    for threshold, scale, suffix in ((1e9, 1e9, "G"), (1e6, 1e6, "M"), (1e5, 1e3, "k")):
        if magnitude >= threshold:
            return f"{value / scale:.4g}{suffix}"
    return f"{value:.6g}"


def draw_view(view, ax=None):
    """Return a figure showing ``view.chart``: series, dashed fits, the marker and a legend."""
    chart = view.chart
    if ax is None:
        fig, ax = figure()
    else:
        fig = ax.figure
    for s in chart.series:
        xs = [float("nan") if v is None else v for v in s.xs]
        ys = [float("nan") if v is None else v for v in s.ys]
        style = {"color": s.color, "label": s.name}
        if s.kind == "points":
            ax.plot(xs, ys, linestyle="none", marker="o", markersize=4, **style)
        else:
            ax.plot(xs, ys, linestyle="--" if s.dashed else "-", marker="o" if s.kind == "line+points" else None,
                    markersize=4, linewidth=1.6, **style)
    if chart.log_x:
        ax.set_xscale("log")
    if chart.log_y:
        ax.set_yscale("log")
    if chart.x_ticks:
        ax.set_xticks(list(chart.x_ticks))
    if chart.y_ticks:
        ax.set_yticks(list(chart.y_ticks))
    marker = chart.marker
    if marker is not None and marker.visible:
        ax.plot([marker.x], [marker.y], marker="o", markersize=11, markerfacecolor="none",
                markeredgecolor="black", markeredgewidth=2, linestyle="none")
        if marker.label:
            # right of the point, or left of it in the chart's right 40% (explorer.js's rule): never off the axes
            right = ax.transAxes.inverted().transform(ax.transData.transform((marker.x, marker.y)))[0] < 0.6
            ax.annotate(marker.label, (marker.x, marker.y), xytext=(9 if right else -9, -4), textcoords="offset points",
                        ha="left" if right else "right", fontsize=floor_pt(fig))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: tick_label(v)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: tick_label(v)))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _pos: ""))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _pos: ""))  # a log axis over less than a decade labels these
    ax.set_xlabel(chart.x_label)
    ax.set_ylabel(chart.y_label)
    if chart.series:
        legend_above(ax)  # above the axes, never over a curve
    if chart.source:
        caption(ax, chart.source)
    return fig

"""Every figure a chapter draws (through its page module) has an alt text that names the x axis the figure
draws: stacked panels that share an x axis label it once, under the last, and each panel's sentence still says
what it is plotted against (issue 36: two alt texts said "against position" where the axis is cached context)."""

from __future__ import annotations

import importlib

import matplotlib.pyplot as plt
import pytest
from chapter_calls import PAGE_CALLS

from lab.book.plots.alt_text import _plain, describe

#: ``ch05.decode_figure()`` in a chapter's code cells: the page module and the function that draws a figure.
CHAPTER_FIGURES = [(page, name) for page, name in PAGE_CALLS if name.endswith("_figure")]


def _drawn_x_label(ax) -> str:
    """The x label drawn for this panel: its own, or the one a panel sharing its x axis draws."""
    group = ax.get_shared_x_axes().get_siblings(ax)
    return next((_plain(other.get_xlabel()) for other in [ax, *group] if _plain(other.get_xlabel())), "")


def test_the_chapters_draw_figures_and_some_share_an_x_axis():
    assert len(CHAPTER_FIGURES) >= 20
    assert ("ch05", "decode_figure") in CHAPTER_FIGURES and ("ch05", "rows_figure") in CHAPTER_FIGURES


@pytest.mark.parametrize(("page", "name"), CHAPTER_FIGURES, ids=[f"{p}.{n}" for p, n in CHAPTER_FIGURES])
def test_the_alt_text_names_the_x_axis_each_panel_is_drawn_against(page, name):
    fig = getattr(importlib.import_module(f"lab.book.pages.{page}"), name)()
    try:
        alt = describe(fig)
        panels = [ax for ax in fig.axes if ax.get_visible() and ax.has_data()]
        drawn = {_drawn_x_label(ax) for ax in panels} - {""}
        for label in drawn:
            assert label in alt, f"{page}.{name}: the x axis {label!r} is not in its alt text: {alt}"
        if all(_drawn_x_label(ax) for ax in panels):
            assert "against position" not in alt, f"{page}.{name}: {alt}"
        # each panel with a y label that shares an x axis is described against that axis, not only the last
        shared = [ax for ax in panels if len(ax.get_shared_x_axes().get_siblings(ax)) > 1 and _plain(ax.get_ylabel())]
        for label in {_drawn_x_label(ax) for ax in shared} - {""}:
            panels_on_it = sum(_drawn_x_label(ax) == label for ax in shared)
            assert alt.count(f"against {label}") >= panels_on_it, f"{page}.{name}: {alt}"
    finally:
        plt.close(fig)

"""The live face of an :class:`lab.book.explorer.Explorer`: ipywidgets controls, readouts and a matplotlib figure.

``readouts_html`` (the readout table) lives here and is shared with the static face. The live face
moves around combinations without data with the same rule as the static page (``Explorer.resolve``).
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from typing import Any



def readouts_html(readouts: Sequence) -> str:
    """The readout table (lab.book.explorer.Readout items), announced to screen readers as it changes."""
    rows = "".join(
        f'<tr><th>{html.escape(r.label)}</th><td><span data-readout="{html.escape(r.name)}">'
        f"{html.escape(r.text)}</span></td></tr>"
        for r in readouts
    )
    return f'<table class="lab-readouts" aria-live="polite">{rows}</table>'


class LiveExplorer:
    """The ipywidgets face: one widget per control, a readout table and a matplotlib figure."""

    def __init__(self, explorer):  # a lab.book.explorer.Explorer (not imported: that module imports this one)
        import ipywidgets as w

        self.explorer = explorer
        self.controls: dict[str, Any] = {}
        for c in explorer.controls:
            options = list(zip(c.labels, c.values, strict=True))
            style = {"description_width": "initial"}
            if c.numeric:
                widget = w.SelectionSlider(options=options, value=c.default, description=c.label,
                                           continuous_update=False, style=style, layout=w.Layout(width="28em"))
            else:
                widget = w.Dropdown(options=options, value=c.default, description=c.label, style=style)
            widget.observe(self._on_change, names="value")
            self.controls[c.name] = widget
        self.readouts = w.HTML()
        self.note = w.HTML()
        self.snap = w.HTML()
        self._moving = False
        self.output = w.Output()
        self.view = None
        self.figure = None
        title = w.HTML(f"<b>{html.escape(explorer.title)}</b>")
        caption = w.HTML(f"<small>{html.escape(explorer.caption)}</small>"
                         + (f"<br><small>{html.escape(explorer.skipped)}</small>" if explorer.skipped else "")) \
            if explorer.caption or explorer.skipped else w.HTML()
        self.widget = w.VBox([title, w.HBox(list(self.controls.values()), layout=w.Layout(flex_flow="row wrap")),
                              w.HBox([self.output, self.readouts]), self.note, self.snap, caption])
        self.refresh()

    @property
    def values(self) -> dict:
        return {name: widget.value for name, widget in self.controls.items()}

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)

    def _on_change(self, change) -> None:
        if self._moving:
            return
        moved = next((name for name, widget in self.controls.items() if widget is change.get("owner")), None)
        asked = self.values
        shown = self.explorer.resolve(asked, moved)
        self.snap.value = ""
        if shown != asked:
            self.snap.value = f"<i>{html.escape(self.explorer.missing(**asked))}: showing the nearest choice with data</i>"
            self._moving = True
            try:
                for name, value in shown.items():
                    self.controls[name].value = value
            finally:
                self._moving = False
        self.refresh()

    def refresh(self) -> None:
        """Recompute the view for the current control values and redraw."""
        import matplotlib.pyplot as plt

        from lab.book.plots.explorer import draw_view  # lazy: pulls in matplotlib

        self.view = self.explorer.compute(**self.values)
        self.readouts.value = readouts_html(self.view.readouts)
        self.note.value = f"<i>{html.escape(self.view.note)}</i>" if self.view.note else ""
        self.figure = None
        outputs = ()
        if self.view.chart is not None:
            self.figure = draw_view(self.view)
            png = io.BytesIO()
            self.figure.savefig(png, format="png", bbox_inches="tight")
            plt.close(self.figure)
            # Set the Output widget's outputs directly (not `with output: display(...)`), so the figure is
            # replaced in one step from any callback, in any front end, and a test can see it.
            outputs = ({"output_type": "display_data", "metadata": {},
                        "data": {"image/png": base64.b64encode(png.getvalue()).decode("ascii"),
                                 "text/plain": "<explorer figure>"}},)
        self.output.outputs = outputs

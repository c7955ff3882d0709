"""Explorers: one description, two faces (live ipywidgets in Jupyter, static HTML + JS on the website).

An explorer is a set of controls (each over a short list of discrete values) and a ``view``
function that maps one value per control to a :class:`View` (readouts, a chart, a note)::

    Explorer(key="a10g-ttft", title="TTFT by prompt length",
             controls=[Control("length", "Prompt length (tokens)", values=[256, 1024], default=1024),
                       Control("backend", "Backend", values=["FLASH_ATTN", "FLEX_ATTENTION"])],
             view=view)

Live, sliders/dropdowns redraw a matplotlib figure. On the static site (``LAB_STATIC=1``) every combination's
``view`` is embedded as JSON and ``book/_static/explorer.js`` redraws an SVG chart: no kernel, no network.
Readout strings are formatted here, so both faces show the same characters.

No reader lands on a view without data: an explorer whose controls cross (a GPU that ran only some
backends or lengths) passes ``why_missing(**values)``, which returns why a combination has no data.
Those combinations are never shown; a move there goes to the nearest combination with data
(:meth:`Explorer.resolve`, mirrored in explorer.js) and the page says why. The build refuses a
combination with data whose readouts are all "n/a", an offered value that leads to no data, and
defaults without data. The static page has a reset button, keeps its state in the URL hash
(``#<key>?<control>=<value>&…``), shows a point on hover or tap, offers a CSV and follows dark mode.
"""

from __future__ import annotations

import html
import itertools
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lab import REPO_ROOT

from lab import LabError

from lab import env
from lab.book.explorer_live import LiveExplorer, readouts_html
from lab.units import power_of_ten

#: Most combinations of control values one static explorer may embed (page size stays small).
MAX_COMBINATIONS = 1500
#: The vendored renderer of the static face; the book lists it in ``_config.yml`` (html_js_files).
EXPLORER_JS = REPO_ROOT / "book" / "_static" / "explorer.js"
SERIES_KINDS = ("line", "points", "line+points")
_FMT = re.compile(r"^(,?\.\d{1,2}f|\.\d{1,2}[eg]|d)$")
_KEY = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def _native(value: Any) -> Any:
    """numpy/pandas scalars -> plain Python (JSON and ipywidgets want these)."""
    return value.item() if hasattr(value, "item") and not isinstance(value, (str, bytes)) else value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _finite_or_none(value: Any) -> float | int | None:
    """A number for the chart; NaN/inf/None become None (a gap in a line, no marker)."""
    value = _native(value)
    if value is None or not _is_number(value) or not math.isfinite(value):
        return None
    return value


def format_value(value: Any, fmt: str) -> str:
    """Format a readout value with a restricted spec (``.Nf``, ``.Ne``, ``.Ng``, ``,.Nf``, ``d``); ``.Ne`` writes
    a power of ten as the tables and the prose do (``.1e``: 4.8 × 10⁻⁷, not 4.8e-07)."""
    value = _native(value)
    if isinstance(value, str):
        return value
    if value is None or not _is_number(value) or not math.isfinite(value):
        return "n/a"
    if fmt == "d":
        return format(int(round(value)), "d")
    if fmt.endswith("e"):
        return power_of_ten(float(value), digits=int(fmt[1:-1]) + 1)
    return format(float(value), fmt)


# --- the description ----------------------------------------------------------------------------

@dataclass
class Control:
    """One input: numbers become a slider over exactly these values, text becomes a dropdown."""

    name: str
    label: str
    values: Sequence[Any]
    default: Any = None          # None: the first value
    labels: Sequence[str] | None = None  # shown instead of str(value), e.g. a GPU name for a dataset path

    def __post_init__(self):
        self.values = [_native(v) for v in self.values]
        if not self.values:
            raise LabError(f"control '{self.name}' has no values; give it at least one")
        kinds = {_is_number(v) for v in self.values}
        if len(kinds) > 1 or not all(_is_number(v) or isinstance(v, str) for v in self.values):
            raise LabError(f"control '{self.name}': values must be all numbers or all text, got {self.values!r}")
        if len(set(self.values)) != len(self.values):
            raise LabError(f"control '{self.name}': values repeat in {self.values!r}")
        self.default = self.values[0] if self.default is None else _native(self.default)
        if self.default not in self.values:
            shown = ", ".join(map(str, self.values))
            raise LabError(f"control '{self.name}': default {self.default!r} is not one of its values ({shown})")
        self.labels = [str(v) for v in self.values] if self.labels is None else [str(s) for s in self.labels]
        if len(self.labels) != len(self.values):
            raise LabError(f"control '{self.name}': {len(self.labels)} labels for {len(self.values)} values")

    @property
    def numeric(self) -> bool:
        return _is_number(self.values[0])


#: Units written against the number: "12%", "0.91×" (a ratio, as the sliders write it: never a letter x).
TIGHT_UNITS = ("%", "×")


@dataclass
class Readout:
    """One number shown beside the chart, formatted with ``fmt``. Without a value (None/NaN) it shows
    ``missing``: why there is none ("not recorded in this dataset"), or 'n/a' when the author gave no reason."""

    name: str
    label: str
    value: Any
    unit: str = ""
    fmt: str = ".3g"
    missing: str = "n/a"

    def __post_init__(self):
        self.value = _native(self.value)
        if not _FMT.match(self.fmt):
            raise LabError(f"readout '{self.name}': format {self.fmt!r} is not one of .Nf, .Ne, .Ng, ,.Nf, d")

    @property
    def has_value(self) -> bool:
        return format_value(self.value, self.fmt) != "n/a"

    @property
    def text(self) -> str:
        if not self.has_value:
            return self.missing
        number = format_value(self.value, self.fmt)
        if not self.unit:
            return number
        return number + ("" if self.unit in TIGHT_UNITS else " ") + self.unit


@dataclass
class Series:
    """One line or set of points. ``color`` defaults to the book's colour for ``name``."""

    name: str
    xs: Sequence[float]
    ys: Sequence[float]
    kind: str = "line"           # line | points | line+points
    dashed: bool = False         # e.g. a fitted curve beside measured points
    color: str | None = None

    def __post_init__(self):
        if self.kind not in SERIES_KINDS:
            raise LabError(f"series '{self.name}': kind {self.kind!r} is not one of {', '.join(SERIES_KINDS)}")
        self.xs = [_finite_or_none(v) for v in self.xs]
        self.ys = [_finite_or_none(v) for v in self.ys]
        if len(self.xs) != len(self.ys):
            raise LabError(f"series '{self.name}': {len(self.xs)} x values but {len(self.ys)} y values")
        from matplotlib.colors import to_hex

        from lab.book.plots import color  # lazy: pulls in matplotlib

        # Any matplotlib colour (name, RGB tuple, hex) becomes '#rrggbb', which SVG and matplotlib both read.
        self.auto_color = self.color is None
        try:
            self.color = to_hex(color(self.name) if self.color is None else self.color)
        except ValueError:
            raise LabError(f"series '{self.name}': {self.color!r} is not a colour") from None


@dataclass
class Marker:
    """The chosen point on the chart."""

    x: float
    y: float
    label: str = ""

    def __post_init__(self):
        self.x, self.y = _finite_or_none(self.x), _finite_or_none(self.y)

    @property
    def visible(self) -> bool:
        return self.x is not None and self.y is not None


@dataclass
class Chart:
    x_label: str
    y_label: str
    series: list[Series] = field(default_factory=list)
    marker: Marker | None = None
    log_x: bool = False
    log_y: bool = False
    x_ticks: Sequence[float] | None = None   # None: chosen automatically
    y_ticks: Sequence[float] | None = None
    source: str = ""                          # which GPU/engine/dataset; written under the chart

    def __post_init__(self):
        # Series that took a default colour must not share one with another series of this chart.
        from matplotlib.colors import to_hex

        from lab.book.plots import COLORS, PALETTE  # lazy: pulls in matplotlib

        # a colour given by the author or the book's fixed colour for a name is kept; the others give way
        free = [s for s in self.series if getattr(s, "auto_color", False) and s.name not in COLORS]
        used = {s.color for s in self.series if s not in free}
        for s in free:
            if s.color in used:
                s.color = next((to_hex(c) for c in PALETTE if to_hex(c) not in used), s.color)
            used.add(s.color)


@dataclass
class View:
    """What an explorer shows for one combination of control values."""

    readouts: list[Readout] = field(default_factory=list)
    chart: Chart | None = None
    note: str = ""


# --- shared HTML pieces (the same strings on both faces) ----------------------------------------

def _check_view(result: Any, where: str) -> View:
    """Reject a view function's result early, naming the call, so the author sees one clear line."""
    if not isinstance(result, View):
        raise LabError(f"{where} returned {type(result).__name__}; expected a lab.book.explorer.View")
    if not isinstance(result.readouts, (list, tuple)) or not all(isinstance(r, Readout) for r in result.readouts):
        raise LabError(f"{where}: View.readouts must be a list of Readout")
    chart = result.chart
    if chart is not None:
        if not isinstance(chart, Chart):
            raise LabError(f"{where}: View.chart is {type(chart).__name__}; expected a Chart or None")
        if not all(isinstance(s, Series) for s in chart.series):
            raise LabError(f"{where}: Chart.series must be a list of Series")
        if chart.marker is not None and not isinstance(chart.marker, Marker):
            raise LabError(f"{where}: Chart.marker is {type(chart.marker).__name__}; expected a Marker or None")
    if not isinstance(result.note, str):
        raise LabError(f"{where}: View.note is {type(result.note).__name__}; expected text")
    return result


def _inline_renderer() -> str:
    """explorer.js as an inline <script> ("</" escaped so the script cannot end early)."""
    source = EXPLORER_JS.read_text(encoding="utf-8").replace("</", "<\\/")
    return f"<script>{source}</script>"


def _static_requested() -> bool:
    """Static face when the book build asks for it, or when no kernel with ipywidgets can show a widget."""
    if env.static_build():
        return True
    try:
        import ipywidgets  # noqa: F401
        from IPython import get_ipython
    except ImportError:
        return True
    shell = get_ipython()
    return shell is None or getattr(shell, "kernel", None) is None


# --- the explorer -------------------------------------------------------------------------------

@dataclass
class Explorer:
    key: str
    title: str
    controls: list[Control]
    view: Callable[..., View]
    caption: str = ""
    #: ``why_missing(**values)``: "" where that combination has data, else why not (e.g. "not run on this GPU").
    #: Such combinations are never shown: moving a control there moves to the nearest one with data (see
    #: :meth:`resolve`), so no reader lands on a view of "n/a" only.
    why_missing: Callable[..., str] | None = None
    #: Datasets left out because they are broken, as one sentence (lab.results.data.skipped_note); "" for none.
    skipped: str = ""

    def __post_init__(self):
        if not _KEY.match(self.key):
            raise LabError(f"explorer key {self.key!r}: use lower-case letters, digits and '-' (it becomes an HTML attribute)")
        if not self.controls or not all(isinstance(c, Control) for c in self.controls):
            raise LabError(f"explorer '{self.key}': controls must be a non-empty list of Control")
        names = [c.name for c in self.controls]
        if len(set(names)) != len(names):
            raise LabError(f"explorer '{self.key}': control names repeat in {names}")
        sizes = [len(c.values) for c in self.controls]
        if math.prod(sizes) > MAX_COMBINATIONS:
            raise LabError(f"explorer '{self.key}' has {math.prod(sizes)} combinations of control values "
                           f"({' x '.join(map(str, sizes))}); the static page holds at most {MAX_COMBINATIONS}: offer fewer values")

    # -- computing views
    @property
    def defaults(self) -> dict:
        return {c.name: c.default for c in self.controls}

    def combinations(self) -> list[dict]:
        """Every combination of control values, first control slowest (the order of the static JSON)."""
        names = [c.name for c in self.controls]
        return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*(c.values for c in self.controls))]

    def missing(self, **values) -> str:
        """Why this combination has no data ("" when it has some)."""
        if self.why_missing is None:
            return ""
        reason = self.why_missing(**{**self.defaults, **values})
        if not isinstance(reason, str):
            raise LabError(f"explorer '{self.key}': why_missing returned {type(reason).__name__}; expected text")
        return reason

    def resolve(self, values: dict, moved: str | None = None) -> dict:
        """The combination shown when a reader asks for ``values`` by moving control ``moved``.

        A combination with data is shown as asked. Otherwise a moved slider goes to its nearest value with
        data (the slider spans the chosen dataset); failing that, the moved control keeps its value and the
        others change as little as possible (fewest controls, then smallest steps, then the first in order).
        ``book/_static/explorer.js`` implements the same rule; tests/test_browser.py checks they agree.
        """
        values = {**self.defaults, **values}
        if not self.missing(**values):
            return values
        index = {c.name: c.values.index(values[c.name]) for c in self.controls}
        control = next((c for c in self.controls if c.name == moved), None)
        if control is not None and control.numeric:
            best = None
            for j, value in enumerate(control.values):
                if not self.missing(**{**values, control.name: value}):
                    if best is None or abs(j - index[control.name]) < abs(best - index[control.name]):
                        best = j
            if best is not None:
                return {**values, control.name: control.values[best]}
        best, best_cost = None, None
        for combo in self.combinations():
            if (control is not None and combo[control.name] != values[control.name]) or self.missing(**combo):
                continue
            steps = [abs(c.values.index(combo[c.name]) - index[c.name]) for c in self.controls]
            cost = (sum(1 for d in steps if d), sum(steps))
            if best_cost is None or cost < best_cost:
                best, best_cost = combo, cost
        if best is None:
            raise LabError(f"explorer '{self.key}': no combination with {moved}={values.get(moved)!r} has data")
        return best

    def compute(self, **values) -> View:
        """``view`` for these control values (missing ones take their defaults), checked."""
        unknown = set(values) - {c.name for c in self.controls}
        if unknown:
            raise LabError(f"explorer '{self.key}' has no control named {sorted(unknown)[0]!r}")
        chosen = {**self.defaults, **values}
        where = f"explorer '{self.key}': view({', '.join(f'{k}={v!r}' for k, v in chosen.items())})"
        return _check_view(self.view(**chosen), where)

    # -- static face
    def static_data(self) -> dict:
        """Everything the browser needs, with identical series, charts and reasons stored once and referenced by
        index (a combination without data is ``{"x": i}``, ``reasons[i]`` saying why)."""
        series_table: list[dict] = []
        series_index: dict[str, int] = {}
        charts: list[dict] = []
        chart_index: dict[str, int] = {}
        views = []
        reasons: list[str] = []
        reason_index: dict[str, int] = {}
        readout_heads = None

        def intern(table, index, item) -> int:
            token = json.dumps(item, sort_keys=True)
            if token not in index:
                index[token] = len(table)
                table.append(item)
            return index[token]

        for combo in self.combinations():
            reason = self.missing(**combo)
            if reason:
                views.append({"x": intern(reasons, reason_index, reason)})
                continue
            view = self.compute(**combo)
            if view.readouts and not any(r.has_value for r in view.readouts):
                raise LabError(f"explorer '{self.key}': view({combo}) shows n/a for every readout; give the explorer "
                               "a why_missing that says why this combination has no data")
            heads = [{"name": r.name, "label": r.label} for r in view.readouts]
            if readout_heads is None:
                readout_heads = heads
            elif heads != readout_heads:
                raise LabError(f"explorer '{self.key}': view({combo}) returned readouts "
                               f"{[h['name'] for h in heads]} but the first combination returned "
                               f"{[h['name'] for h in readout_heads]}; every combination needs the same readouts")
            entry: dict[str, Any] = {"r": [r.text for r in view.readouts], "n": view.note}
            chart = view.chart
            if chart is not None:
                axes = {"xl": chart.x_label, "yl": chart.y_label, "logx": bool(chart.log_x), "logy": bool(chart.log_y),
                        "xt": [_native(t) for t in chart.x_ticks] if chart.x_ticks else None,
                        "yt": [_native(t) for t in chart.y_ticks] if chart.y_ticks else None, "src": chart.source}
                entry["c"] = intern(charts, chart_index, axes)
                entry["s"] = [intern(series_table, series_index,
                                     {"name": s.name, "kind": s.kind, "dashed": s.dashed, "color": s.color,
                                      "x": s.xs, "y": s.ys}) for s in chart.series]
                m = chart.marker
                entry["m"] = [m.x, m.y, m.label] if m is not None and m.visible else None
            views.append(entry)
        self._check_reachable(views)
        return {
            "key": self.key,
            "title": self.title,
            # Where the view was defined, so a test can rebuild the explorer and recompute every value.
            "origin": f"{getattr(self.view, '__module__', '?')}:{getattr(self.view, '__qualname__', '?')}",
            "controls": [{"name": c.name, "label": c.label, "labels": c.labels, "values": c.values,
                          "numeric": c.numeric, "default": c.values.index(c.default)} for c in self.controls],
            "readouts": readout_heads or [],
            "charts": charts,
            "series": series_table,
            "reasons": reasons,
            "views": views,
        }

    def _check_reachable(self, views: list[dict]) -> None:
        """Every offered value must lead to some data, and the defaults must have data."""
        if self.missing(**self.defaults):
            raise LabError(f"explorer '{self.key}': the default choices {self.defaults} have no data "
                           f"({self.missing(**self.defaults)}); choose defaults that do")
        shown = [combo for combo, v in zip(self.combinations(), views, strict=True) if "x" not in v]
        for c in self.controls:
            dead = [v for v in c.values if not any(combo[c.name] == v for combo in shown)]
            if dead:
                raise LabError(f"explorer '{self.key}': control '{c.name}' offers {dead} but no combination with "
                               "them has data; leave those values out")

    def static_html(self) -> str:
        """The static face: an HTML fragment (skeleton + JSON) that explorer.js brings to life."""
        data = self.static_data()
        # "<" escaped so no value can close the <script> element early.
        payload = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
        first = self.compute()
        key = html.escape(self.key)
        parts = [f'<div class="lab-explorer" data-explorer="{key}">',
                 f'<div class="lab-explorer-title">{html.escape(self.title)}</div>',
                 '<div class="lab-controls">']
        for c in self.controls:
            name = html.escape(c.name)
            index = c.values.index(c.default)
            parts.append(f'<label class="lab-control"><span class="lab-control-label">{html.escape(c.label)}</span>')
            if c.numeric:
                parts.append(f'<input type="range" data-control="{name}" min="0" max="{len(c.values) - 1}" step="1" '
                             f'value="{index}" aria-label="{html.escape(c.label)}" aria-valuetext="{html.escape(c.labels[index])}">'
                             f'<output data-value-for="{name}">{html.escape(c.labels[index])}</output>')
            else:
                options = "".join(f'<option value="{i}"{" selected" if i == index else ""}>{html.escape(text)}</option>'
                                  for i, text in enumerate(c.labels))
                parts.append(f'<select data-control="{name}" aria-label="{html.escape(c.label)}">{options}</select>')
            parts.append("</label>")
        parts.append("</div>")
        parts.append('<div class="lab-explorer-body">')
        if first.chart is not None or data["charts"]:
            parts.append(f'<svg data-chart viewBox="0 0 640 360" role="img" aria-label="{html.escape(self.title)}" '
                         'xmlns="http://www.w3.org/2000/svg"></svg>')
        parts.append(readouts_html(first.readouts))
        parts.append("</div>")
        # A tap on the chart names the point under the finger here (there is no hover on a phone).
        parts.append('<p class="lab-point" data-point aria-live="polite"></p>')
        parts.append(f'<p class="lab-note" data-note aria-live="polite">{html.escape(first.note)}</p>')
        # Said when a choice had no data and the explorer moved to the nearest one that has.
        parts.append('<p class="lab-snap" data-snap aria-live="polite"></p>')
        parts.append(f'<div class="lab-tools"><button type="button" data-reset>Reset</button>'
                     f'<a data-csv download="{key}.csv" href="#">Download CSV of what is shown</a></div>')
        if self.caption:
            parts.append(f'<p class="lab-caption">{html.escape(self.caption)}</p>')
        if self.skipped:
            parts.append(f'<p class="lab-note lab-skipped">{html.escape(self.skipped)}</p>')
        parts.append('<noscript>This explorer needs JavaScript; the values shown are for the default choices.</noscript>')
        parts.append(f'<script type="application/json" data-explorer-data>{payload}</script>')
        parts.append("</div>")
        return "".join(parts)

    def standalone_html(self) -> str:
        """A complete page with the renderer inlined: for trying one explorer without building the book."""
        return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                f"<title>{html.escape(self.title)}</title>{_inline_renderer()}</head>"
                f"<body>{self.static_html()}</body></html>\n")

    # -- live face
    def live(self) -> LiveExplorer:
        return LiveExplorer(self)

    # -- display hooks (IPython calls _ipython_display_ first; other front ends use the mime bundle)
    def _repr_mimebundle_(self, include=None, exclude=None):
        # The book lists explorer.js once per page (LAB_STATIC=1); elsewhere (nbconvert, a notebook
        # viewer) the fragment carries the renderer itself. Several copies on one page are harmless.
        fragment = self.static_html()
        if not env.static_build():
            fragment = _inline_renderer() + fragment
        return {"text/html": fragment, "text/plain": f"Explorer({self.key!r}: {self.title})"}

    def _ipython_display_(self):
        from IPython.display import display

        if _static_requested():
            display(self._repr_mimebundle_(), raw=True)
        else:
            display(self.live().widget)

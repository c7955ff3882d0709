"""No dead ends: every explorer in lab.book shows a value in every state a reader can select."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import lab.book
from lab import LabError
from lab.book.explorer import Chart, Control, Explorer, Readout, Series, View


def book_explorers() -> list[Explorer]:
    """Every explorer a no-argument ``*explorer`` factory in lab.book builds (the ones the chapters call); a factory
    returns None where its study is not on file yet (lab.book.load_explorer), which shows no state at all."""
    found = {}
    for info in pkgutil.iter_modules(lab.book.__path__):
        module = importlib.import_module(f"lab.book.{info.name}")
        for name, factory in vars(module).items():
            if not (name.endswith("explorer") and inspect.isfunction(factory) and factory.__module__ == module.__name__):
                continue
            if any(p.default is p.empty for p in inspect.signature(factory).parameters.values()):
                continue
            explorer = factory()
            if explorer is not None:
                found[explorer.key] = explorer
    return list(found.values())


EXPLORERS = book_explorers()


def test_the_book_has_its_explorers():
    assert {"roofline-kernels", "attention-bytes", "kernels-prefill", "kernels-decode", "sweep-explorer",
            "prefill-explorer", "census", "paged-kv", "concurrency-explorer"} <= {e.key for e in EXPLORERS}


@pytest.mark.parametrize("explorer", EXPLORERS, ids=lambda e: e.key)
def test_every_selectable_state_shows_a_value(explorer):
    data = explorer.static_data()  # refuses all-n/a views, unreachable values and defaults without data
    shown = [v for v in data["views"] if "x" not in v]
    assert shown, f"{explorer.key}: no state has data"
    for view in shown:
        assert any(r != "n/a" for r in view["r"])
    # any request lands on a state with data
    for control in explorer.controls:
        for value in control.values:
            state = explorer.resolve({**explorer.defaults, control.name: value}, control.name)
            assert not explorer.missing(**state)


@pytest.mark.parametrize("explorer", EXPLORERS, ids=lambda e: e.key)
def test_a_value_that_is_missing_says_why_in_every_state_a_reader_sees(explorer):
    """No bare "n/a": a readout without a value names the reason (not recorded, not published, the nearest
    measured point instead), in the default state and every other state that is shown."""
    bare = []
    for combo in [explorer.defaults] + explorer.combinations():
        if explorer.missing(**combo):
            continue
        bare += [f"{r.label} at {combo}" for r in explorer.compute(**combo).readouts if r.text == "n/a"]
    assert not bare, f"{explorer.key}: {len(bare)} readouts say only n/a, e.g. {bare[:3]}"


def test_a_readout_without_a_value_shows_its_reason():
    assert Readout("q", "share", None, unit="%", fmt=".1f", missing="not published").text == "not published"
    assert not Readout("q", "share", float("nan"), missing="x").has_value
    assert Readout("q", "share", 0.0, unit="%", fmt=".1f", missing="x").text == "0.0%"
    with pytest.raises(LabError, match="n/a for every readout"):  # reasons are no values: still refused
        Explorer("toy", "toy", [Control("n", "n", [1])],
                 view=lambda n: View(readouts=[Readout("v", "v", None, missing="not run")])).static_data()


@pytest.mark.parametrize("explorer", EXPLORERS, ids=lambda e: e.key)
def test_no_two_series_of_a_chart_share_a_colour(explorer):
    for combo in explorer.combinations()[:: max(1, len(explorer.combinations()) // 20)]:
        if explorer.missing(**combo):
            continue
        chart = explorer.compute(**combo).chart
        if chart is not None:
            colours = [s.color for s in chart.series if not s.name.endswith("quadratic fit")]
            assert len(set(colours)) == len(colours), f"{explorer.key} at {combo}: {colours}"


#: The explorers' chart backgrounds (explorer.js: --lab-bg) and text colours (--lab-fg), light and dark theme,
#: as explorer.js writes them.
THEMES = {"light": ("#fff", "#222"), "dark": ("#1f2227", "#e3e3e3")}


def _rgb(colour: str) -> tuple[int, int, int]:
    digits = colour[1:] if len(colour) == 7 else "".join(c * 2 for c in colour[1:])
    return tuple(int(digits[i:i + 2], 16) for i in (0, 2, 4))


def _luminance(colour: str) -> float:
    lin = [c / 255 / 12.92 if c / 255 <= 0.04045 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in _rgb(colour)]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def _contrast(a: str, b: str) -> float:
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def drawn_colour(colour: str, theme: str) -> str:
    """A series colour as explorer.js paints it: near-black ones (its ink() rule) in the theme's text colour."""
    r, g, b = _rgb(colour)
    return THEMES[theme][1] if (0.299 * r + 0.587 * g + 0.114 * b) / 255 < 0.3 else colour


def test_explorer_js_backgrounds_are_the_ones_checked_here():
    from lab.book.explorer import EXPLORER_JS

    css = EXPLORER_JS.read_text(encoding="utf-8")
    for background, text in THEMES.values():
        assert f"--lab-bg:{background};--lab-fg:{text};" in css


@pytest.mark.parametrize("explorer", EXPLORERS, ids=lambda e: e.key)
def test_chart_lines_reach_3_to_1_against_the_chart_in_both_themes(explorer):
    """WCAG 1.4.11 (non-text contrast): every line and point of every chart, light and dark."""
    low = set()
    for combo in explorer.combinations():
        if explorer.missing(**combo):
            continue
        chart = explorer.compute(**combo).chart
        for series in chart.series if chart is not None else []:
            for theme, (background, _) in THEMES.items():
                ratio = _contrast(drawn_colour(series.color, theme), background)
                if ratio < 3:
                    low.add(f"{series.name} {series.color} in {theme}: {ratio:.2f}")
    assert not low, f"{explorer.key}: {sorted(low)}"


def test_the_book_palette_keeps_3_to_1_on_white_and_on_the_dark_chart():
    from lab.book.plots import COLORS, PALETTE

    for colour in {*PALETTE, *COLORS.values()}:
        for theme, (background, _) in THEMES.items():
            assert _contrast(drawn_colour(colour, theme), background) >= 3, (colour, theme)


def test_h200_sweep_offers_its_own_backends_and_the_a10g_slider_stops_at_its_data():
    explorer = next(e for e in EXPLORERS if e.key == "sweep-explorer")
    h200 = explorer.resolve({**explorer.defaults, "study": "h200/vllm0.26-qwen2.5-7b"}, "study")
    assert h200["backend"].startswith("FLASH_ATTN/") and h200["study"] == "h200/vllm0.26-qwen2.5-7b"
    a10g = explorer.resolve({**explorer.defaults, "length": 131072}, "length")
    assert a10g["length"] == 30720 and a10g["study"] == explorer.defaults["study"]
    note = explorer.compute(**{**explorer.defaults, "length": 8192}).note
    assert "8192-token prompt" in note and "8193 tokens once tokenized" in note


def _toy(why_missing=None, value=lambda n, kind: 1.0):
    return Explorer(key="toy", title="toy",
                    controls=[Control("n", "n", values=[1, 2, 3]), Control("kind", "kind", values=["a", "b"])],
                    view=lambda n, kind: View(readouts=[Readout("v", "value", value(n, kind))]),
                    why_missing=why_missing)


def test_an_all_na_view_is_refused_at_build_time():
    with pytest.raises(LabError, match="n/a for every readout"):
        _toy(value=lambda n, kind: None if (n, kind) == (3, "b") else 1.0).static_data()
    _toy(why_missing=lambda n, kind: "not run" if (n, kind) == (3, "b") else "",
         value=lambda n, kind: None if (n, kind) == (3, "b") else 1.0).static_data()


def test_values_without_any_data_and_defaults_without_data_are_refused():
    with pytest.raises(LabError, match="offers \\[3\\]"):
        _toy(why_missing=lambda n, kind: "never" if n == 3 else "").static_data()
    with pytest.raises(LabError, match="default choices"):
        _toy(why_missing=lambda n, kind: "no" if (n, kind) == (1, "a") else "").static_data()


def test_resolve_moves_a_slider_within_its_data_and_keeps_a_chosen_option():
    toy = _toy(why_missing=lambda n, kind: "" if (kind == "a" or n == 1) else "b only at 1")
    assert toy.resolve({"n": 3, "kind": "b"}, "n") == {"n": 1, "kind": "b"}        # the slider snaps back
    assert toy.resolve({"n": 3, "kind": "b"}, "kind") == {"n": 1, "kind": "b"}     # the option stays
    assert toy.resolve({"n": 2, "kind": "a"}, "n") == {"n": 2, "kind": "a"}        # data: as asked
    html = toy.static_html()
    assert "data-reset" in html and 'download="toy.csv"' in html and "data-snap" in html


def test_explorer_colours_are_distinct_and_fixed_ones_kept():
    chart = Chart("x", "y", series=[Series("naive softmax", [1], [1]), Series("zzz", [1], [1]),
                                    Series("FLEX_ATTENTION", [1], [1])])
    colours = [s.color for s in chart.series]
    assert len(set(colours)) == 3 and colours[2] == "#d62728"


def test_the_live_face_moves_around_missing_combinations_too():
    pytest.importorskip("ipywidgets")
    toy = _toy(why_missing=lambda n, kind: "" if (kind == "a" or n == 1) else "b only at 1")
    live = toy.live()
    live.controls["n"].value = 3
    live.controls["kind"].value = "b"  # (3, b) has no data: the option stays, the slider goes back to 1
    assert live.values == {"n": 1, "kind": "b"}
    assert "b only at 1" in live.snap.value
    live.controls["kind"].value = "a"
    assert live.snap.value == ""

"""lab.book.explorer: validation, the static face's JSON equals view(...), the live face recomputes."""

from __future__ import annotations

import html as html_lib
import json
import math
import re
from pathlib import Path

import pytest

from lab import LabError
from lab.book.explorer import MAX_COMBINATIONS, Chart, Control, Explorer, Marker, Readout, Series, View, format_value


def square_view(n, shape):
    """A toy view with numbers checkable by hand: y = n^2 (or n^3 for 'cube')."""
    power = 2 if shape == "square" else 3
    xs = [1, 2, 3, 4]
    return View(
        readouts=[Readout("y", "n to the power", n ** power, unit="units", fmt=",.1f"),
                  Readout("half", "half of it", n ** power / 2, fmt=".2e")],
        chart=Chart("n", "y", series=[Series(shape, xs, [x ** power for x in xs], kind="line+points"),
                                      Series("constant", xs, [5, 5, 5, 5], kind="points")],
                    marker=Marker(n, n ** power, label="here"), log_y=True),
        note=f"{shape} of {n}",
    )


def toy(view=square_view, **kwargs) -> Explorer:
    return Explorer(key="toy", title="Powers",
                    controls=[Control("n", "n", values=[1, 2, 3, 4], default=3),
                              Control("shape", "Shape", values=["square", "cube"])],
                    view=view, **kwargs)


def embedded_json(fragment: str) -> dict:
    match = re.search(r'<script type="application/json" data-explorer-data>(.*?)</script>', fragment, re.S)
    assert match, "no JSON block in the static face"
    return json.loads(match.group(1))


# --- formatting ------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, fmt, expected", [
    (1.23456, ".3f", "1.235"), (12345.678, ",.1f", "12,345.7"), (0.000123, ".2e", "1.23 × 10⁻⁴"),
    (2048.0, "d", "2048"), (2047.6, "d", "2048"), (0.5, ".3g", "0.5"),
    (None, ".3f", "n/a"), (float("nan"), ".3f", "n/a"), ("text", ".3f", "text"),
])
def test_format_value(value, fmt, expected):
    assert format_value(value, fmt) == expected


def test_readout_text_units():
    assert Readout("t", "TTFT", 2.0671, unit="s", fmt=".3f").text == "2.067 s"
    assert Readout("q", "share", 12.24, unit="%", fmt=".1f").text == "12.2%"
    assert Readout("q", "share", None, unit="%", fmt=".1f").text == "n/a"
    assert Readout("r", "ratio", 0.912, unit="×", fmt=".2f").text == "0.91×"  # as the sliders write it


def test_ratio_readouts_use_the_multiplication_sign_not_a_letter_x():
    from lab.book import batch_explorer, load_explorer, sweep_explorer

    for module in (batch_explorer, load_explorer, sweep_explorer):
        assert 'unit="x"' not in Path(module.__file__).read_text(encoding="utf-8"), module.__name__


@pytest.mark.parametrize("fmt", ["%.3f", ".3x", "{:.2f}", ".3", "e"])
def test_readout_rejects_other_format_specs(fmt):
    with pytest.raises(LabError, match="format"):
        Readout("t", "TTFT", 1.0, fmt=fmt)


# --- validation ------------------------------------------------------------------------------------

def test_unknown_default_is_one_clear_line():
    with pytest.raises(LabError) as err:
        Control("length", "Prompt length", values=[256, 1024], default=300)
    assert "default 300 is not one of its values (256, 1024)" in str(err.value)
    assert "\n" not in str(err.value)


def test_empty_values():
    with pytest.raises(LabError, match="control 'length' has no values"):
        Control("length", "Prompt length", values=[])


def test_mixed_and_repeated_values():
    with pytest.raises(LabError, match="all numbers or all text"):
        Control("x", "x", values=[1, "two"])
    with pytest.raises(LabError, match="repeat"):
        Control("x", "x", values=[1, 1])


def test_too_many_combinations():
    controls = [Control("a", "a", values=list(range(40))), Control("b", "b", values=list(range(40)))]
    with pytest.raises(LabError, match=f"1600 combinations .*at most {MAX_COMBINATIONS}"):
        Explorer(key="big", title="big", controls=controls, view=square_view)


def test_view_returning_wrong_type_names_the_call():
    explorer = toy(view=lambda n, shape: {"ttft": 1.0})
    with pytest.raises(LabError) as err:
        explorer.static_html()
    message = str(err.value)
    assert "view(n=1, shape='square') returned dict; expected a lab.book.explorer.View" in message
    assert "\n" not in message


def test_readouts_must_agree_across_combinations():
    def view(n, shape):
        return View(readouts=[Readout("a" if n < 3 else "b", "x", n)])
    with pytest.raises(LabError, match="same readouts"):
        toy(view=view).static_data()


def test_bad_key_and_unknown_control():
    with pytest.raises(LabError, match="key"):
        Explorer(key="Bad Key", title="t", controls=[Control("n", "n", values=[1])], view=square_view)
    with pytest.raises(LabError, match="no control named 'm'"):
        toy().compute(m=1)


# --- static face -----------------------------------------------------------------------------------

def test_static_json_equals_view_for_every_combination():
    explorer = toy()
    data = embedded_json(explorer.static_html())
    assert [c["name"] for c in data["controls"]] == ["n", "shape"]
    assert data["controls"][0]["default"] == 2  # index of default=3
    assert len(data["views"]) == 8
    for index, combo in enumerate(explorer.combinations()):
        expected = square_view(**combo)
        stored = data["views"][index]
        assert stored["r"] == [r.text for r in expected.readouts]
        assert stored["n"] == expected.note
        assert stored["m"] == [expected.chart.marker.x, expected.chart.marker.y, "here"]
        series = [data["series"][i] for i in stored["s"]]
        assert [(s["name"], s["x"], s["y"], s["kind"]) for s in series] == \
            [(s.name, s.xs, s.ys, s.kind) for s in expected.chart.series]
        assert data["charts"][stored["c"]]["logy"] is True


def test_static_json_by_hand_for_one_combination():
    data = embedded_json(toy().static_html())
    view = data["views"][2 * 2 + 1]  # n=3 (index 2), shape=cube (index 1)
    assert view["r"] == ["27.0 units", "1.35 × 10¹"]
    assert view["m"] == [3, 27, "here"]


def test_identical_series_are_stored_once():
    data = embedded_json(toy().static_html())
    # 'square', 'cube' and 'constant' are the same for every n: three series for eight views.
    assert len(data["series"]) == 3
    assert len(data["charts"]) == 1


def test_static_skeleton_controls_and_default_readouts():
    fragment = toy().static_html()
    assert 'data-explorer="toy"' in fragment
    assert '<input type="range" data-control="n" min="0" max="3" step="1" value="2"' in fragment
    assert '<output data-value-for="n">3</output>' in fragment
    assert '<select data-control="shape"' in fragment and '<option value="0" selected>square</option>' in fragment
    assert '<span data-readout="y">9.0 units</span>' in fragment  # default n=3, square
    assert "<svg data-chart" in fragment


def test_script_cannot_be_closed_by_data():
    def view(n, shape):
        return View(readouts=[Readout("x", "x", "</script><b>")], note="</script>")
    fragment = toy(view=view).static_html()
    payload = fragment.split("data-explorer-data>", 1)[1]
    assert payload.count("</script>") == 1  # only the real end tag
    assert embedded_json(fragment)["views"][0]["r"] == ["</script><b>"]


def test_nan_becomes_a_gap_not_invalid_json():
    def view(n, shape):
        return View(chart=Chart("x", "y", series=[Series("s", [1, 2], [float("nan"), 2.0])],
                                marker=Marker(float("nan"), 1.0)))
    data = embedded_json(toy(view=view).static_html())
    assert data["series"][0]["y"] == [None, 2.0]
    assert data["views"][0]["m"] is None


def test_static_face_when_lab_static_set(monkeypatch):
    monkeypatch.setenv("LAB_STATIC", "1")
    from lab.book import explorer as widgets

    assert widgets._static_requested()
    bundle = toy()._repr_mimebundle_()
    # The book loads explorer.js once per page (html_js_files), so the fragment does not repeat it.
    assert bundle["text/html"].startswith('<div class="lab-explorer" data-explorer="toy">')


def test_static_face_outside_the_book_carries_its_renderer(monkeypatch):
    monkeypatch.delenv("LAB_STATIC", raising=False)
    fragment = toy()._repr_mimebundle_()["text/html"]
    assert fragment.startswith("<script>") and "wireAll" in fragment
    assert fragment.count("</script>") == 2  # the renderer's and the JSON's


def test_standalone_page_inlines_the_renderer():
    page = toy().standalone_html()
    assert "wireAll" in page and 'data-explorer="toy"' in page
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in page


def test_renderer_is_small_and_local():
    from lab.book.explorer import EXPLORER_JS

    source = EXPLORER_JS.read_text()
    assert len(source.encode()) < 30_000  # drawing, resolving, hash, CSV, a marker label placed clear of the data: one small file
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", source)


# --- live face -------------------------------------------------------------------------------------

def test_live_face_recomputes_when_a_control_moves(monkeypatch):
    pytest.importorskip("ipywidgets")
    import ipywidgets

    face = toy().live()
    slider, dropdown = face.controls["n"], face.controls["shape"]
    assert isinstance(slider, ipywidgets.SelectionSlider) and isinstance(dropdown, ipywidgets.Dropdown)
    assert '<span data-readout="y">9.0 units</span>' in face.readouts.value
    slider.value = 4
    assert '<span data-readout="y">16.0 units</span>' in face.readouts.value
    dropdown.value = "cube"
    assert '<span data-readout="y">64.0 units</span>' in face.readouts.value
    assert face.view.note == "cube of 4"
    # The figure drawn for the live face shows the same marker.
    line = [ln for ln in face.figure.axes[0].lines if ln.get_markersize() > 10][0]
    assert list(line.get_xdata()) == [4] and list(line.get_ydata()) == [64]
    (shown,) = face.output.outputs  # the Output widget holds exactly the latest figure
    assert shown["data"]["image/png"].startswith("iVBORw0KGgo")  # base64 of the PNG signature


def test_live_and_static_faces_show_identical_strings():
    explorer = toy()
    face = explorer.live()
    data = embedded_json(explorer.static_html())
    for index, combo in enumerate(explorer.combinations()):
        for name, value in combo.items():
            face.controls[name].value = value
        shown = re.findall(r'data-readout="[^"]+">([^<]*)<', face.readouts.value)
        assert [html_lib.unescape(s) for s in shown] == data["views"][index]["r"]


def test_matplotlib_renderer_draws_every_series():
    from lab.book.plots.explorer import draw_view, tick_label

    fig = draw_view(square_view(2, "square"))
    ax = fig.axes[0]
    assert [ln.get_label() for ln in ax.lines][:2] == ["square", "constant"]
    assert ax.get_yscale() == "log"
    assert [tick_label(v) for v in (256, 16384, 250000, 1.5e6, 0.25)] == ["256", "16384", "250k", "1.5M", "0.25"]
    assert math.isclose(ax.lines[0].get_ydata()[3], 16)


def test_live_face_in_a_real_kernel(monkeypatch):
    """Without LAB_STATIC a kernel shows the ipywidgets face, and moving a control there recomputes."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.delenv("LAB_STATIC", raising=False)
    cells = [
        "from lab.book.sweep_explorer import a10g_prefill_explorer\nexplorer = a10g_prefill_explorer()\nexplorer",
        "face = explorer.live()\nface.controls['length'].value = 2048\nface.controls['backend'].value = 'FLEX_ATTENTION'\n"
        "print(face.readouts.value)\nprint(type(face.controls['length']).__name__, len(face.output.outputs))",
    ]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    shown = notebook.cells[0].outputs
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in shown), shown
    assert not any("text/html" in o.get("data", {}) for o in shown), "the kernel got the static face"
    printed = "".join(o.get("text", "") for o in notebook.cells[1].outputs)
    assert '<span data-readout="ttft">0.544 s</span>' in printed  # s1.log: FLEX_ATTENTION, 2048 -> 0.544 s
    assert "SelectionSlider 1" in printed  # the Output widget holds one figure


def test_series_colours_become_hex_for_both_faces():
    assert Series("a", [1], [1], color=(1.0, 0.5, 0.0)).color == "#ff8000"
    assert Series("a", [1], [1], color="red").color == "#ff0000"
    assert Series("FLASH_ATTN", [1], [1]).color == "#1f77b4"  # the book's colour for that backend
    with pytest.raises(LabError, match="not a colour"):
        Series("a", [1], [1], color="not-a-colour")

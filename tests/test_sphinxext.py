"""lab.book.sphinxext: an inline script registered twice by Sphinx 7.4 is written once."""

from sphinx.builders.html._assets import _JavaScript

from lab.book.sphinxext import _dedupe_page_scripts, unique_scripts


def test_inline_script_added_as_none_and_empty_filename_is_kept_once():
    body = 'const THEBE_JS_URL = "x"'
    scripts = [_JavaScript("_static/doctools.js", priority=200), _JavaScript(None, body=body),
               _JavaScript("", body=body), _JavaScript("_static/explorer.js"), _JavaScript("_static/doctools.js", priority=200)]
    kept = unique_scripts(scripts)
    assert [s.filename for s in kept] == ["_static/doctools.js", None, "_static/explorer.js"]


def test_different_bodies_and_attributes_are_all_kept():
    scripts = [_JavaScript(None, body="var a = 1"), _JavaScript(None, body="var b = 2"),
               _JavaScript("x.js", **{"async": "async"}), _JavaScript("x.js")]
    assert unique_scripts(scripts) == scripts


class _App:
    """The little of a Sphinx app the extension reads: its theme options."""

    def __init__(self, theme_options):
        self.config = type("Config", (), {"html_theme_options": theme_options})()


def test_page_context_list_is_changed_in_place():
    scripts = [_JavaScript(None, body="const a = 1"), _JavaScript("", body="const a = 1")]
    context = {"script_files": scripts}
    _dedupe_page_scripts(_App({}), "intro", "page.html", context, None)
    assert context["script_files"] is scripts and len(scripts) == 1


def test_thebe_files_dropped_only_without_a_thebe_button():
    def page():
        return {"script_files": [_JavaScript(None, body='const THEBE_JS_URL = "https://example.invalid/x.js"'),
                                 _JavaScript("_static/sphinx-thebe.js?v=1"), _JavaScript("_static/explorer.js")],
                "css_files": ["_static/sphinx-thebe.css?v=1", "_static/quiz.css"]}

    offline = page()
    _dedupe_page_scripts(_App({}), "intro", "page.html", offline, None)
    assert [s.filename for s in offline["script_files"]] == ["_static/explorer.js"]
    assert offline["css_files"] == ["_static/quiz.css"]
    with_button = page()
    _dedupe_page_scripts(_App({"launch_buttons": {"thebe": True}}), "intro", "page.html", with_button, None)
    assert len(with_button["script_files"]) == 3 and len(with_button["css_files"]) == 2


def test_the_icon_script_is_dropped_and_nothing_else():
    from lab.book.sphinxext import drop_icon_script

    page = ('<head>\n  <script defer src="../_static/scripts/bootstrap.js?digest=1"></script>\n'
            '  <script defer src="../_static/scripts/fontawesome.js?digest=55c2"></script>\n</head>')
    assert drop_icon_script(page) == '<head>\n  <script defer src="../_static/scripts/bootstrap.js?digest=1"></script>\n</head>'
    assert drop_icon_script("<p>fontawesome.js is named here in prose</p>") == "<p>fontawesome.js is named here in prose</p>"


def test_long_names_in_table_cells_get_places_to_wrap_and_formulas_do_not():
    from lab.book.long_names import add_breaks_in_cells

    page = ('<p>a_very_long_name_in_running_text</p><table><tr><th>kernel</th><td class="x">'
            'void cutlass::device_kernel&lt;flash::x&gt;</td><td>\\(a_very_long_tex_name_here\\)</td></tr></table>')
    out = add_breaks_in_cells(page)
    assert "<p>a_very_long_name_in_running_text</p>" in out  # only cells
    assert '<td class="x">void cutlass::<wbr>device_<wbr>kernel&lt;<wbr>flash::<wbr>x&gt;</td>' in out
    assert "<td>\\(a_very_long_tex_name_here\\)</td>" in out  # MathJax reads its TeX unbroken
    assert out.replace("<wbr>", "") == page


def test_a_figure_takes_its_alt_text_from_its_png(tmp_path):
    from PIL import Image, PngImagePlugin

    from lab.book.plots.alt_text import ALT_KEY
    from lab.book.sphinxext import describe_images

    (tmp_path / "_images").mkdir()
    info = PngImagePlugin.PngInfo()
    info.add_text(ALT_KEY, "Chart. TTFT (s) against tokens; series: a & b.")
    Image.new("RGB", (4, 4)).save(tmp_path / "_images" / "f.png", pnginfo=info)
    Image.new("RGB", (4, 4)).save(tmp_path / "_images" / "plain.png")
    (tmp_path / "book").mkdir()
    page = tmp_path / "book" / "x.html"
    html_text = ('<img alt="../_images/f.png" src="../_images/f.png" /><img alt="../_images/plain.png" '
                 'src="../_images/plain.png" /><img alt="a logo" src="../_images/f.png" />')
    out = describe_images(html_text, page)
    assert '<img alt="Chart. TTFT (s) against tokens; series: a &amp; b." src="../_images/f.png" />' in out
    assert '<img alt="../_images/plain.png" src="../_images/plain.png" />' in out  # no chunk: left as it was
    assert '<img alt="a logo" src="../_images/f.png" />' in out  # an author's alt text is kept

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

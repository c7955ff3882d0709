"""Slides: MyST flattened for nbconvert, slide types from headings, decks that load nothing remote."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from lab import REPO_ROOT, LabError
from lab.book import slides
from lab.book.slides import convert_myst, slide_cells

GLUE = {"ttft": {"data": {"text/plain": "10.18123"}}, "name": {"data": {"text/plain": "'FLASH_ATTN'"}}}

CHAPTER = """---
jupytext:
  text_representation: {extension: .md, format_name: myst, format_version: 0.13}
kernelspec: {display_name: Python 3, language: python, name: python3}
---

# A short chapter

Opening line with a glued value {glue:text}`answer:.2f` and a link to [the roofline](01-roofline.md).

```{code-cell} ipython3
:tags: [remove-input]
from myst_nb import glue
glue("answer", 6 * 7 / 10, display=False)
```

## A question

:::{dropdown} Model answer
It is {glue:text}`answer:.1f`.
:::

```{code-cell} ipython3
print("visible code, visible output")
```
"""


def test_roles_directives_and_links_become_plain_markdown():
    text = """(sec-x)=
# Title {math}`n^2`

% a comment
TTFT {glue:text}`ttft:.2f` s with {glue:text}`name`; see {doc}`the trace <07-the-trace>` and [sweeps](06-vllm-sweeps.md#fit).

```python
# not a heading
```

:::{note}
Careful.
:::

::::{dropdown} Answer
:open:
Inside {glue:text}`ttft:.1f`.
::::
"""
    segments = convert_myst(text, GLUE, link=lambda target, anchor: "../book/" + target.replace(".md", ".html") + anchor)
    body = "\n".join(segments[0].lines)
    assert "# Title $n^2$" in body and "(sec-x)=" not in body and "a comment" not in body
    assert "TTFT 10.18 s with FLASH_ATTN; see the trace and [sweeps](../book/06-vllm-sweeps.html#fit)." in body
    assert "```python\n# not a heading\n```" in body
    assert "> **Note**" in body and "> Careful." in body
    assert "**Answer**" in body
    assert segments[1].kind == "fragment" and "Inside 10.2." in "\n".join(segments[1].lines)
    assert ":open:" not in "\n".join(ln for s in segments for ln in s.lines)


def test_a_glued_table_shows_as_its_html_not_its_repr():
    glue = {"table": {"data": {"text/plain": "<pandas.io.formats.style.Styler at 0x7f00>",
                               "text/html": "<style>\n</style>\n<table>\n\n  <tr><td>1.5</td></tr>\n</table>\n"}}}
    body = "\n".join(convert_myst("Before.\n\n```{glue} table\n```\n\nAfter.", glue)[0].lines)
    assert "<table>" in body and "<td>1.5</td>" in body and "Styler at 0x" not in body
    assert "\n\n  <tr>" not in body  # no blank line inside the HTML block


def test_unknown_glue_name_is_an_error():
    with pytest.raises(LabError, match="glue name 'nope'"):
        convert_myst("{glue:text}`nope`", GLUE)


def test_headings_set_slide_types_and_long_prose_goes_to_notes():
    long_prose = "\n\n".join(f"Paragraph {i} " + "word " * 60 for i in range(4))
    text = f"# Chapter\n\nIntro.\n\n## Section\n\n{long_prose}\n\n### Detail\n\nShort.\n\n" + "\n".join(
        f"- item {i} " + "x" * 90 for i in range(12))
    cells = slide_cells(convert_myst(text, {}))
    kinds = [k for k, _ in cells]
    assert kinds[0] == "slide" and cells[0][1].startswith("# Chapter")
    assert ("slide", "## Section") == (cells[1][0], cells[1][1].splitlines()[0])
    assert "Paragraph 0" in cells[1][1] and "Paragraph 3" not in cells[1][1]
    assert cells[2][0] == "notes" and "Paragraph 3" in cells[2][1]
    assert "subslide" not in kinds  # → skips vertical sub-slides: every slide is horizontal
    detail = next(i for i, (_, text) in enumerate(cells) if text.startswith("### Detail"))
    assert cells[detail][0] == "slide"
    # a long list continues on further slides instead of vanishing into the notes
    items = [c for c in cells[detail:] if "- item" in c[1]]
    assert len(items) > 1 and all(k == "slide" for k, _ in items)
    assert sum(c[1].count("- item") for c in items) == 12


def test_remote_references_are_found():
    page = ('<script src="https://cdn.example/x.js"></script><link rel="stylesheet" href="//cdn.example/a.css">'
            '<style>@import url("https://fonts.example/f.css");</style><a href="https://example.org">fine</a>'
            "<script type=module>import m from 'https://cdn.example/m.esm.min.mjs';</script>"
            '<script>require(["x.js", "https://unpkg.com/reveal.js@4/dist/reveal.js"], f);'
            "// docs: https://example.org/page.html</script>")
    found = slides.remote_references(page)
    assert len(found) == 5, found


def _deck(tmp_path: Path, stem: str, text: str | None = None, **kw) -> Path:
    book = tmp_path / "book"
    book.mkdir(exist_ok=True)
    if text is not None:
        (book / f"{stem}.md").write_text(text, encoding="utf-8")
    else:
        book = REPO_ROOT / "book"
    site = tmp_path / "site"
    return slides.export(stem, out_dir=site / "slides", site_dir=site, execute=True, book_dir=book, **kw)


def test_short_chapter_builds_an_offline_deck(tmp_path):
    page = _deck(tmp_path, "99-short", CHAPTER)
    html = page.read_text(encoding="utf-8")
    assert page.name == "99-short.slides.html"
    assert slides.remote_references(html) == []
    assert slides.missing_local_references(html, page) == []
    assert "vendor/reveal.js/dist/reveal.js" in html and "vendor/require.js" in html
    assert "4.20" in html and "It is 4.2." in html  # glue filled in, the role gone
    assert "{glue" not in html and "glue(" not in html  # the remove-input glue cell is gone
    assert 'class="fragment"' in html  # the dropdown answer waits for a key press
    assert "visible output" in html
    assert 'href="../book/01-roofline.html"' in html


def test_the_interview_chapter_converts(tmp_path):
    page = _deck(tmp_path, "08-interview-prep")
    html = page.read_text(encoding="utf-8")
    assert slides.remote_references(html) == []
    assert re.search(r"Q1\. Why is standard attention memory-bound, and is FlashAttention\?", html)
    assert "{glue" not in html
    from lab.book import interview

    ridge = interview.a10g_facts()["ridge_h100"].value
    assert f"about {ridge:.0f} FLOP/byte" in html  # a glued fact, filled in on the slide


def test_a_template_that_loads_a_cdn_fails_the_export(tmp_path, monkeypatch):
    monkeypatch.setattr(slides, "TEMPLATE_NAME", "reveal")  # nbconvert's stock template imports mermaid from a CDN
    with pytest.raises(LabError, match="from the network"):
        _deck(tmp_path, "99-short", CHAPTER)


def test_without_a_site_build_it_asks_for_one(tmp_path):
    with pytest.raises(LabError, match="build the site first"):
        slides.load_chapter("08-interview-prep", executed_dir=tmp_path)


def test_cli_is_registered():
    out = subprocess.run([sys.executable, "-m", "lab", "slides", "--help"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert out.returncode == 0 and "--execute" in out.stdout
    out = subprocess.run([sys.executable, "-m", "lab", "slides", "--site", "/nonexistent"], cwd=REPO_ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.startswith("error: ") and "Traceback" not in out.stderr


@pytest.mark.browser
def test_deck_runs_offline_in_a_browser(tmp_path):
    from test_quiz import CHROMIUM

    if not Path(CHROMIUM).exists():
        pytest.skip(f"chromium not found at {CHROMIUM}")
    sync_api = pytest.importorskip("playwright.sync_api")
    page_file = _deck(tmp_path, "99-short", CHAPTER.replace("Opening line", "Math $n^2$ and an opening line"))
    problems: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox", "--disable-gpu", "--allow-file-access-from-files"])
        try:
            page = browser.new_page()
            page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(("file:", "data:"))
                       else (problems.append(r.request.url), r.abort()))
            page.on("console", lambda m: m.type == "error" and problems.append(m.text))
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.on("requestfailed", lambda r: problems.append(f"failed: {r.url}"))
            page.goto(page_file.as_uri(), wait_until="load")
            page.wait_for_function("document.querySelector('.reveal.ready') !== null", timeout=60000)
            page.wait_for_function("window.MathJax && window.MathJax.startup && window.MathJax.startup.document", timeout=60000)
            before = page.evaluate("location.hash")
            page.keyboard.press("ArrowRight")
            page.wait_for_function(f"location.hash !== {before!r}", timeout=30000)
            assert page.locator("mjx-container").count() >= 1  # $n^2$ typeset by the vendored MathJax 3
        finally:
            browser.close()
    assert problems == []


class _AnyGlue(dict):
    """Every glue name resolves to a number: checks the conversion of a chapter without executing it."""

    def get(self, key, default=None):
        return {"data": {"text/plain": "1.0"}}


@pytest.mark.parametrize("stem", slides.toc_chapters())
def test_every_chapter_flattens_to_plain_markdown(stem):
    import jupytext

    nb = jupytext.read(REPO_ROOT / "book" / f"{stem}.md")
    out = slides.to_slides_notebook(nb, _AnyGlue(), link=lambda target, anchor: "../book/x.html" + anchor)
    kinds = [c.metadata["slideshow"]["slide_type"] for c in out.cells]
    assert kinds.count("slide") >= 2 and out.metadata["title"]
    for cell in out.cells:
        if cell.cell_type == "markdown":
            assert not re.search(r"\{glue|^:{3,}|^`{3,}\{|\]\([\w-]+\.md", cell.source, re.M), cell.source[:200]


# --- the exported decks in a browser: → reaches everything, nothing runs off a slide ------------------

DECK_VIEWPORTS = {"laptop": {"width": 1366, "height": 900}, "phone": {"width": 390, "height": 844}}
#: What a class must be able to reach with → alone: figures, tables and explorers.
CONTENT = "img, table, [data-explorer]"

_STATE = """() => {
  const slide = Reveal.getCurrentSlide(), box = document.querySelector('.reveal .slides').getBoundingClientRect();
  const inner = slide.querySelector(':scope > .lab-fit') || slide;
  const r = inner.getBoundingClientRect();
  const seen = [...slide.querySelectorAll('[data-lab-id]')].map(e => e.getAttribute('data-lab-id'));
  let smallest = 1e9;
  for (const e of slide.querySelectorAll('p, li')) {  // prose as the reader sees it: both scales applied
    if (e.closest('aside.notes, [data-explorer]') || !e.textContent.trim()) continue;
    smallest = Math.min(smallest, parseFloat(getComputedStyle(e).fontSize) * r.width / inner.offsetWidth);
  }
  return {seen, smallest, last: Reveal.isLastSlide() && !Reveal.availableFragments().next,
          over: [r.top - box.top, box.bottom - r.bottom, r.left - box.left, box.right - r.right].map(Math.round),
          where: JSON.stringify(Reveal.getIndices())};
}"""


#: Resolves once the shown slide is laid out for good: its MathJax typesetting (and the template's refit that
#: follows it) has run and a frame has been drawn. Events, not a sleep: a busy machine only makes it later.
_SETTLED = """() => new Promise(done => {
  const typeset = window.MathJax && window.MathJax.typesetPromise
    ? window.MathJax.typesetPromise([Reveal.getCurrentSlide()]) : Promise.resolve();
  typeset.then(() => requestAnimationFrame(() => requestAnimationFrame(() => done(true))));
})"""


#: Smallest prose a deck may show, after its fit-to-slide scaling (a phone slide read at arm's length; the
#: book's bar for chart text is 9 px). The longest interview answers land near 11 px on a 390 px phone.
MIN_PHONE_TEXT_PX = 10


def walk_deck(page) -> tuple[set[str], list[str], float]:
    """Press → from the first slide to the last; what became visible, what ran over, the smallest text."""
    page.wait_for_function("document.querySelector('.reveal.ready') !== null", timeout=60000)
    page.evaluate("() => Reveal.configure({transition: 'none', backgroundTransition: 'none'})")  # measure at rest
    page.evaluate(f"""() => document.querySelectorAll('.reveal .slides {', .reveal .slides '.join(CONTENT.split(', '))}')
                         .forEach((e, i) => e.setAttribute('data-lab-id', String(i)))""")
    seen, over, smallest = set(), [], 1e9
    for _ in range(1000):
        page.evaluate(_SETTLED)
        state = page.evaluate(_STATE)
        seen.update(state["seen"])
        smallest = min(smallest, state["smallest"])
        if min(state["over"]) < -2:
            over.append(f"slide {state['where']}: content runs {min(state['over'])} px past the slide")
        if state["last"]:
            return seen, over, smallest
        page.keyboard.press("ArrowRight")
    raise AssertionError("→ never reached the last slide")


@pytest.mark.slow
@pytest.mark.browser
def test_arrow_right_reaches_every_figure_and_table_and_nothing_runs_off_a_slide(served_site):
    from test_quiz import CHROMIUM

    if not Path(CHROMIUM).exists():
        pytest.skip(f"chromium not found at {CHROMIUM}")
    sync_api = pytest.importorskip("playwright.sync_api")
    base, html = served_site
    decks = sorted((html / "slides").glob("*.slides.html"))
    assert len(decks) == len(slides.toc_chapters())
    problems = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"])
        try:
            for name, viewport in DECK_VIEWPORTS.items():
                for deck in decks:
                    page = browser.new_page(viewport=viewport)
                    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
                    page.goto(f"{base}slides/{deck.name}", wait_until="load")
                    total = page.locator(f".reveal .slides :is({CONTENT})").count()
                    seen, over, smallest = walk_deck(page)
                    if len(seen) != total:
                        problems.append(f"{deck.name} ({name}): → reaches {len(seen)} of {total} figures/tables/explorers")
                    problems.extend(f"{deck.name} ({name}): {o}" for o in over)
                    if smallest < MIN_PHONE_TEXT_PX:
                        problems.append(f"{deck.name} ({name}): text as small as {smallest:.1f} px")
                    page.close()
        finally:
            browser.close()
    assert not problems, "\n".join(problems)


def test_long_tables_and_quizzes_are_cut_into_slides():
    import pandas as pd

    from lab.book.quiz import Question, Quiz
    from lab.book.slide_split import TABLE_ROWS_PER_SLIDE, output_slides

    table = pd.DataFrame({"n": range(30), "ms": [i * 1.5 for i in range(30)]}).to_html()
    quiz = Quiz("q", [Question(f"Question {i}?", ["yes", "no"], 0, "Because.") for i in range(3)])
    outputs = [{"output_type": "stream", "text": "note"},
               {"output_type": "display_data", "data": {"text/html": table}},
               {"output_type": "display_data", "data": {"image/png": "iVBOR", "text/plain": "<Figure>"}},
               {"output_type": "display_data", "data": {"text/html": quiz.to_html(inline_assets=False)}}]
    groups = output_slides(outputs)
    assert len(groups) == 3 + 1 + 3  # 30 rows in three parts, the figure, a slide per question
    assert groups[0][0]["output_type"] == "stream"  # text stays with the rich output after it
    parts = [g[-1]["data"]["text/html"] for g in groups[:3]]
    body_rows = [p.split("<tbody>")[1].count("<tr") for p in parts]
    assert all("<thead>" in p for p in parts) and sum(body_rows) == 30 and max(body_rows) <= TABLE_ROWS_PER_SLIDE
    questions = [g[0]["data"]["text/html"] for g in groups[4:]]
    assert [q.count('class="lab-quiz-question"') for q in questions] == [1, 1, 1]
    assert all(q.startswith('<div class="lab-quiz"') and q.rstrip().endswith("</div>") for q in questions)

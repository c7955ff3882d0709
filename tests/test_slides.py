"""Slides: MyST flattened for nbconvert, slide types from headings, decks that load nothing remote."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from lab import REPO_ROOT, LabError
from lab.book import slide_text, slides
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


@pytest.mark.parametrize("text, spec", [
    ("1234.5678", ""), ("1234.5678", ",.0f"), ("1234.5678", ".3g"), ("0.0412", ".1%"), ("7", "d"),
    ("'FLASH_ATTN/FA3'", ""), ("'FLASH_ATTN/FA3'", "s"), ("'a b'", ">8s"), ("not a literal", ""),
    ("12", "x"), ("3.14159", "e"), ("[1, 2]", ""), ("2.5", "n"),
])
def test_slides_format_a_glued_value_as_myst_nb_does(text, spec):
    """The slides' own copy of myst-nb's rule (the GPU box's wheels lack what myst-nb's import pulls in)."""
    from myst_nb.core.variables import format_plain_text
    assert slides.glued_plain_text(text, spec) == format_plain_text(text, spec)


def test_slides_do_not_import_myst_nb_rendering():
    """A box with the offline wheels has myst-nb but not myst-parser or importlib_metadata: the course kit
    counts its slides there, so building slide text must not import myst_nb.core.render."""
    code = ("import sys; import lab.book.slides as s; s._glue_text({'data': {'text/plain': '1.5'}}, 'x', '.1f'); "
            "print('myst_nb.core.render' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


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


def test_the_interview_chapter_converts(tmp_path, built_site):
    """The interview page quotes the facts the teaching chapters glued (lab.book.quoted): its deck is made from
    the site build, where those chapters built first."""
    page = slides.export("08-interview-prep", out_dir=tmp_path / "slides", site_dir=built_site)
    html = page.read_text(encoding="utf-8")
    assert slides.remote_references(html) == []
    assert re.search(r"Q1\. Why is standard attention memory-bound, and is FlashAttention\?", html)
    assert "{glue" not in html
    from lab.results import roofline

    ridge = roofline.datasheet_ridge("H100-SXM").value  # chapter 1's h100_ridge_datasheet, quoted by the page
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


#: What the template decided for the window a deck runs in: the phone's portrait layout or the projected one.
_LAYOUT = """() => ({portrait: document.documentElement.classList.contains('lab-portrait'),
                    slide_width: Reveal.getConfig().width, window: [innerWidth, innerHeight]})"""


@pytest.mark.browser
def test_speaker_view_frames_show_the_projected_slide_not_the_phone_layout(tmp_path):
    """The S key (the course kit's advice to a teacher) opens reveal's speaker view: the deck again in frames, the
    current slide in one taller than it is wide and under 700 px. The phone's portrait rule is for a phone's
    screen; inside those frames the slide is the projected one (issue 36)."""
    from test_quiz import CHROMIUM

    if not Path(CHROMIUM).exists():
        pytest.skip(f"chromium not found at {CHROMIUM}")
    sync_api = pytest.importorskip("playwright.sync_api")
    page_file = _deck(tmp_path, "99-short", CHAPTER)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox", "--disable-gpu", "--allow-file-access-from-files"])
        try:
            ready = "document.querySelector('.reveal.ready') !== null"
            phone = browser.new_page(viewport=DECK_VIEWPORTS["phone"])
            phone.goto(page_file.as_uri(), wait_until="load")
            phone.wait_for_function(ready, timeout=60000)
            on_phone = phone.evaluate(_LAYOUT)
            # the size reveal's notes plugin asks for its window (window.open(..., "width=1100,height=700"))
            laptop = browser.new_page(viewport={"width": 1100, "height": 700})
            laptop.goto(page_file.as_uri(), wait_until="load")
            laptop.wait_for_function(ready, timeout=60000)
            with laptop.expect_popup() as opened:
                laptop.keyboard.press("s")
            speaker = opened.value
            speaker.wait_for_function("document.querySelectorAll('iframe').length >= 2", timeout=30000)
            in_frames = []
            for handle in speaker.query_selector_all("iframe"):
                frame = handle.content_frame()
                frame.wait_for_function(ready, timeout=60000)
                in_frames.append(frame.evaluate(_LAYOUT))
        finally:
            browser.close()
    assert on_phone["portrait"] and on_phone["slide_width"] < 960  # the rule itself still fires on a phone
    current = in_frames[0]
    width, height = current["window"]
    assert width < 700 and height > width, in_frames  # the frame is phone-shaped: the old rule fired here
    assert all(not f["portrait"] and f["slide_width"] == 960 for f in in_frames), in_frames


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


# --- the exported decks in a browser: → reaches everything, nothing is cut off or too small ---------------

#: A projector (1280 x 720, the smaller of the usual two) and a phone. On the projector nothing may be cut off, scroll or be drawn below 14 px; on
#: the phone a box may scroll (a wide table sideways, keeping its first column; a slide too tall at 0.9x
#: down) if swipes inside it scroll it rather than change the slide, and nothing is drawn below 14 px either.
DECK_VIEWPORTS = {"laptop": {"width": 1280, "height": 720}, "phone": {"width": 390, "height": 844}}
MIN_SLIDE_TEXT_PX = 14
#: What a class must be able to reach with → alone: figures, tables and explorers.
CONTENT = "img, table, [data-explorer]"

_STATE = """() => {
  const slide = Reveal.getCurrentSlide(), box = document.querySelector('.reveal .slides').getBoundingClientRect();
  document.querySelectorAll('[data-lab-shown]').forEach(e => e.removeAttribute('data-lab-shown'));
  slide.setAttribute('data-lab-shown', '1');
  return {seen: [...slide.querySelectorAll('[data-lab-id]')].map(e => e.getAttribute('data-lab-id')),
          last: Reveal.isLastSlide() && !Reveal.availableFragments().next,
          frame: {left: box.left, right: box.right, top: box.top, bottom: box.bottom},
          where: JSON.stringify(Reveal.getIndices())};
}"""


#: Resolves once the shown slide is laid out for good: its MathJax typesetting (and the template's refit that
#: follows it) has run and a frame has been drawn. Events, not a sleep: a busy machine only makes it later.
_SETTLED = """() => new Promise(done => {
  const typeset = window.MathJax && window.MathJax.typesetPromise
    ? window.MathJax.typesetPromise([Reveal.getCurrentSlide()]) : Promise.resolve();
  typeset.then(() => requestAnimationFrame(() => requestAnimationFrame(() => done(true))));
})"""


#: A sticky first column may take this much of its scrolling box at most (the rest is for the values).
MAX_STICKY_SHARE = 0.4


def slide_problems(probed: dict, viewport: str) -> list[str]:
    """What a slide (measured by tests/layout_probe.py) must not show at this viewport."""
    found = list(probed["cut"][:3])
    if probed["smallest"] < MIN_SLIDE_TEXT_PX - 0.05:  # a chart drawn at a rounded width: 13.99 px is 14
        found.append(f"text as small as {probed['smallest']:.1f} px ({probed['smallestWhat'][:40]})")
    for box in probed["scrolls"]:
        if box["sideways"] and not box["hinted"]:
            found.append(f"{box['what'][:40]} scrolls sideways and does not say so (no visible scroll hint)")
        if box["sideways"] and not box["down"] and box["stickyShare"] > MAX_STICKY_SHARE:
            found.append(f"{box['what'][:40]}: its sticky first column takes {box['stickyShare']:.0%} of the box")
        if viewport == "laptop" and not (box["code"] and not box["down"]):  # a long line of code scrolls, hinted
            found.append(f"{box['what'][:40]} must be scrolled {box['by']} px to be read (a projected slide cannot)")
        elif viewport != "laptop" and box["swipes"]:
            found.append(f"{box['what'][:40]} scrolls, but a swipe on it changes the slide (no data-prevent-swipe)")
        elif viewport != "laptop" and box["table"] and not box["down"] and not box["sticky"] \
                and box["firstShare"] <= MAX_STICKY_SHARE:  # a first column wider than that scrolls with the rest
            found.append(f"{box['what'][:40]} scrolls sideways without keeping its first column in view")
    return found


#: One idea per slide: running text (not headings, code, tables, formulas) beyond this with no figure is the
#: chapter re-flowed, not a teacher's slide (the exporter keeps about 480 characters; the rest is speaker notes).
#: The same rule as the exporter's (lab.book.slide_text), there for all of a slide's text.
MAX_SLIDE_CHARS = slide_text.MAX_SLIDE_CHARS
#: A slide's figure fills the slide: this share of its width, or of its height for a tall figure, at least.
MIN_FIGURE_FILL = 0.8

#: What a teacher's slide must be, measured on the shown slide: its running text, how much of the slide its
#: figure fills, and whether any code line was wrapped (a listing drawn on more lines than it has).
_METRICS = """(frame) => {
  const slide = Reveal.getCurrentSlide();
  const shown = e => e.offsetParent !== null && !e.closest('aside.notes');
  const skip = e => e.closest('aside.notes, pre, code, table, [data-explorer], .lab-quiz, mjx-container, h1, h2, h3, h4, .lab-scroll-hint');
  let text = '';
  const walker = document.createTreeWalker(slide, NodeFilter.SHOW_TEXT);
  for (let n; (n = walker.nextNode());) { if (!skip(n.parentElement) && shown(n.parentElement)) text += n.textContent; }
  const figures = [...slide.querySelectorAll('img')].filter(i => shown(i) && !i.closest('[data-explorer], table')).map(i => {
    const r = i.getBoundingClientRect();
    return Math.max(r.width / (frame.right - frame.left), r.height / (frame.bottom - frame.top));
  });
  const wrapped = [...slide.querySelectorAll('pre')].filter(shown).filter(pre => {
    const text = pre.textContent, lines = text.split('\\n').length - (text.endsWith('\\n') ? 1 : 0);
    const style = getComputedStyle(pre), line = parseFloat(style.lineHeight);
    const inner = pre.clientHeight - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom);
    // drawn on more rows than it has lines, in a box that lets lines wrap
    return line > 0 && Math.round(inner / line) > lines && !/^(pre|nowrap)$/.test(style.whiteSpace);
  }).map(pre => pre.textContent.trim().slice(0, 30));
  return {chars: text.replace(/\\s+/g, ' ').trim().length, figures, wrapped,
          rich: !!slide.querySelector('img, table, [data-explorer]')};
}"""


def teaching_problems(metrics: dict, viewport: str) -> list[str]:
    """What makes a slide the chapter re-flowed rather than a teacher's slide (laptop: the projected deck)."""
    found = []
    if metrics["chars"] > MAX_SLIDE_CHARS and not metrics["rich"]:
        found.append(f"{metrics['chars']} characters of running text and no figure (one idea a slide: the rest "
                     "belongs in the speaker notes)")
    if viewport == "laptop":
        found += [f"its figure fills only {fill:.0%} of the slide" for fill in metrics["figures"] if fill < MIN_FIGURE_FILL]
    found += [f"code wrapped onto more lines than it has: {what!r}" for what in metrics["wrapped"]]
    return found


def walk_deck(page, viewport: str) -> tuple[set[str], list[str]]:
    """Press → from the first slide to the last; what became visible, and what each slide must not show."""
    from layout_probe import probe

    page.wait_for_function("document.querySelector('.reveal.ready') !== null", timeout=60000)
    page.evaluate("() => Reveal.configure({transition: 'none', backgroundTransition: 'none'})")  # measure at rest
    page.evaluate(f"""() => document.querySelectorAll('.reveal .slides {', .reveal .slides '.join(CONTENT.split(', '))}')
                         .forEach((e, i) => e.setAttribute('data-lab-id', String(i)))""")
    seen, problems = set(), []
    for _ in range(1000):
        page.evaluate(_SETTLED)
        state = page.evaluate(_STATE)
        seen.update(state["seen"])
        problems += [f"slide {state['where']}: {p}" for p in slide_problems(probe(page, "[data-lab-shown]", state["frame"]),
                                                                          viewport)]
        problems += [f"slide {state['where']}: {p}" for p in teaching_problems(page.evaluate(_METRICS, state["frame"]), viewport)]
        if state["last"]:
            return seen, problems
        page.keyboard.press("ArrowRight")
    raise AssertionError("→ never reached the last slide")


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("viewport", sorted(DECK_VIEWPORTS))
def test_arrow_right_reaches_every_figure_and_table_and_no_slide_cuts_or_shrinks_text(served_site, viewport):
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
            for deck in decks:
                page = browser.new_page(viewport=DECK_VIEWPORTS[viewport])
                page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
                page.goto(f"{base}slides/{deck.name}", wait_until="load")
                total = page.locator(f".reveal .slides :is({CONTENT})").count()
                seen, found = walk_deck(page, viewport)
                if len(seen) != total:
                    problems.append(f"{deck.name}: → reaches {len(seen)} of {total} figures/tables/explorers")
                problems.extend(f"{deck.name} {viewport}, {p}" for p in found)
                page.close()
        finally:
            browser.close()
    assert not problems, "\n".join(problems)


def test_long_tables_and_quizzes_are_cut_into_slides():
    import pandas as pd

    from lab.book.quiz import Question, Quiz
    from lab.book.slide_split import output_slides
    from lab.book.slide_tables import LINE_PX, ROW_PAD_PX, SLIDE_PX

    table = pd.DataFrame({"n": range(60), "ms": [i * 1.5 for i in range(60)]}).to_html()
    quiz = Quiz("q", [Question(f"Question {i}?", ["yes", "no"], 0, "Because.") for i in range(3)])
    outputs = [{"output_type": "stream", "text": "note"},
               {"output_type": "display_data", "data": {"text/html": table}},
               {"output_type": "display_data", "data": {"image/png": "iVBOR", "text/plain": "<Figure>"}},
               {"output_type": "display_data", "data": {"text/html": quiz.to_html(inline_assets=False)}}]
    groups = output_slides(outputs)
    per_slide = SLIDE_PX // (LINE_PX + ROW_PAD_PX) - 1  # one-line rows under a one-row header
    parts = -(-60 // per_slide)
    assert len(groups) == parts + 1 + 2 * 3  # 60 rows in parts, the figure, each question then its answer
    assert groups[0][0]["output_type"] == "stream"  # text stays with the rich output after it
    pages = [g[-1]["data"]["text/html"] for g in groups[:parts]]
    body_rows = [p.split("<tbody>")[1].count("<tr") for p in pages]
    assert all("<thead>" in p for p in pages) and sum(body_rows) == 60 and max(body_rows) <= per_slide
    questions = [g[0]["data"]["text/html"] for g in groups[-6::2]]
    answers = [g[0]["data"]["text/html"] for g in groups[-5::2]]
    assert [q.count('class="lab-quiz-question"') for q in questions] == [1, 1, 1]
    assert all(q.startswith('<div class="lab-quiz"') and q.rstrip().endswith("</div>") for q in questions)
    assert all("Because." not in q and "data-feedback" in q for q in questions)  # the class guesses first
    assert [re.search(r"Self-check \d+: answer", a).group(0) for a in answers] == [
        f"Self-check {n}: answer" for n in (1, 2, 3)]
    assert all("Because." in a and "yes</p>" in a and "lab-quiz-question" not in a for a in answers)


def _cells(page: str) -> list[list[str]]:
    from lab.book.slide_tables import cell_text

    rows = re.findall(r"<tr\b.*?</tr>", page, re.S)
    return [[cell_text(c) for c in re.findall(r"<t[hd]\b[^>]*>(.*?)</t[hd]>", r, re.S)] for r in rows]


def test_a_wide_table_is_cut_into_column_groups_that_keep_the_row_names():
    import pandas as pd

    from lab.book.slide_tables import SLIDE_CHARS, split_table

    wide = pd.DataFrame({"kernel": ["flash", "flex", "naive"],
                         **{f"heading {i} (ms)": [12345678.901 * (i + 1), 2.5, 3.5] for i in range(9)}})
    parts = split_table(wide.style.hide(axis="index").format("{:,.3f}", subset=list(wide.columns[1:])).to_html())
    assert len(parts) > 1
    seen = []
    for part in parts:
        cells = _cells(part)
        assert cells[0][0] == "kernel" and [r[0] for r in cells[1:]] == ["flash", "flex", "naive"]
        assert sum(max(len(w) for w in col.split()) + 2 for col in cells[0]) <= SLIDE_CHARS
        seen += cells[0][1:]
    assert seen == [c for c in wide.columns[1:]]  # every column once, in order
    assert '<style type="text/css">' in parts[0]  # what came with the table (the Styler's CSS) stays with it


def test_a_table_too_long_for_the_slides_is_summarised_with_a_link():
    import pandas as pd

    from lab.book.slide_split import output_slides
    from lab.book.slide_tables import MAX_PARTS, split_table

    prose = pd.DataFrame({"rule": [f"rule-{i}" for i in range(40)],
                          "why": ["a sentence long enough to wrap over two or three lines of a slide " * 4] * 40})
    page = prose.to_html(index=False)
    assert split_table(page) is None  # more than MAX_PARTS slides
    (group,) = output_slides([{"output_type": "display_data", "data": {"text/html": page}}],
                             chapter_url="../book/07-the-trace.html#sorting")
    summary = group[0]["data"]["text/html"]
    assert "A table of 40 rows and 2 columns" in summary and "Columns: rule, why." in summary
    assert "rule-0, rule-1" in summary and "and 32 more" in summary
    assert 'href="../book/07-the-trace.html#sorting"' in summary and "<table" not in summary
    assert MAX_PARTS >= 2


def test_long_names_get_break_points_and_a_table_that_is_not_plain_stays_whole():
    from lab.book.long_names import add_breaks
    from lab.book.slide_tables import split_table

    cell = '<td class="x">void cutlass::device_kernel&lt;flash::enable_sm90&gt; and a_short</td>'
    assert add_breaks(cell) == ('<td class="x">void cutlass::<wbr>device_<wbr>kernel&lt;<wbr>flash::<wbr>enable_<wbr>sm90&gt;'
                                " and a_short</td>")
    merged = "<table><tr><th colspan=2>x</th></tr><tr><td>1</td><td>2</td></tr></table>"
    assert split_table(merged) == [merged]


def test_long_listings_and_printed_text_continue_on_further_slides():
    from lab.book.slide_split import CODE_LINES_PER_SLIDE, code_parts, output_slides

    source = "\n".join(f"x{i} = {i}" + ("\n" if i % 10 == 9 else "") for i in range(60))
    parts = code_parts(source)
    assert len(parts) > 2 and "\n".join(parts).split() == source.split()
    assert all(len(p.splitlines()) <= CODE_LINES_PER_SLIDE for p in parts)
    assert all(p.splitlines()[-1] == f"x{int(p.splitlines()[-1][1:].split()[0])} = " + p.splitlines()[-1].split()[-1]
               for p in parts)
    assert parts[0].endswith("x19 = 19")  # cut at the blank line, not in the middle of a paragraph
    groups = output_slides([{"output_type": "stream", "name": "stdout", "text": source}])
    assert len(groups) == len(parts) and all(len(g) == 1 for g in groups)


def test_an_explorer_caption_goes_to_the_speaker_notes():
    from lab.book.sweep_explorer import a10g_prefill_explorer

    explorer = a10g_prefill_explorer()
    explorer.caption = "Points are measured & the line is a fit."
    nb = nbformat_notebook([explorer._repr_mimebundle_()])
    out = slides.to_slides_notebook(nb, {})
    html = "".join("".join(o.get("data", {}).get("text/html", "")) for c in out.cells for o in c.get("outputs", []))
    assert "data-explorer=" in html and 'class="lab-caption"' not in html
    notes = [c.source for c in out.cells if c.metadata["slideshow"]["slide_type"] == "notes"]
    assert notes == ["Points are measured & the line is a fit."]


def nbformat_notebook(bundles: list[dict]):
    import nbformat

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("explorer", metadata={"tags": ["remove-input"]})
    cell.outputs = [nbformat.v4.new_output("display_data", data=b) for b in bundles]
    nb.cells = [nbformat.v4.new_markdown_cell("# Chapter\n\n## An explorer"), cell]
    return nb


def test_teaching_problems_name_a_wall_of_text_a_small_figure_and_wrapped_code():
    wall = {"chars": MAX_SLIDE_CHARS + 1, "figures": [], "wrapped": [], "rich": False}
    assert len(teaching_problems(wall, "laptop")) == 1
    assert teaching_problems({**wall, "rich": True}, "laptop") == []  # text beside a figure: the figure is the idea
    small = {"chars": 0, "figures": [MIN_FIGURE_FILL - 0.1, 1.0], "wrapped": ["def f("], "rich": True}
    assert [p.split()[0] for p in teaching_problems(small, "laptop")] == ["its", "code"]
    assert len(teaching_problems(small, "phone")) == 1  # a phone's slide is narrow: only the wrapped code


def test_code_is_cut_between_functions_and_never_mid_line():
    from lab.book.slide_split import CODE_LINES_PER_SLIDE, code_parts, shown_code_parts

    def function(name: str, body: int) -> str:
        return f"@triton.jit\ndef {name}(x):\n" + "\n".join(f"    x = x + {i}  # step {i}" for i in range(body))

    source = function("first", 18) + "\n\n\n" + function("second", 18)
    parts = code_parts(source)
    assert [p.splitlines()[0:2] for p in parts] == [["@triton.jit", "def first(x):"], ["@triton.jit", "def second(x):"]]
    assert "\n".join(parts).split() == source.split()
    long_line = "y = " + " + ".join(f"value_{i}" for i in range(40))
    assert code_parts(long_line) == [long_line]  # one long line stays one line (it scrolls, it is never wrapped)
    shown = {"output_type": "execute_result", "data": {"text/markdown": f"```python\n{source}\n```\n",
                                                        "text/plain": source}}
    pieces = shown_code_parts(shown)
    assert len(pieces) == 2 and all(p["data"]["text/markdown"].startswith("```python\n@triton.jit") for p in pieces)
    assert all(len(p["data"]["text/plain"].splitlines()) <= CODE_LINES_PER_SLIDE for p in pieces)


def test_a_long_paragraph_keeps_its_first_sentences_on_the_slide_and_the_rest_in_the_notes():
    paragraph = " ".join(f"Sentence {i} says one thing with `code_{i}` in it." for i in range(40))
    cells = slide_cells(convert_myst(f"## Idea\n\n{paragraph}\n\n- **Item.** " + paragraph, {}))
    shown = [text for kind, text in cells if kind != "notes"]
    notes = "\n".join(text for kind, text in cells if kind == "notes")
    assert all(len(text) <= slides.SLIDE_TEXT_BUDGET + 20 for text in shown)
    assert shown[0].startswith("## Idea\n\nSentence 0") and shown[0].rstrip().endswith(".")
    assert "Sentence 39 says" in notes and "- **Item.** Sentence 0" in "\n".join(shown)


# --- one idea a slide: a slide with no figure shows at most MAX_SLIDE_CHARS characters of text ------------------

#: What makes a slide a figure's (its text then reads beside the figure).
FIGURES = ["img", "svg", "canvas", "figure", "iframe", "video"]


def walls_of_text(page: str) -> list[str]:
    """Each leaf slide (a <section> holding no section) of a deck with more than MAX_SLIDE_CHARS characters of
    text and no figure, as a rule checker counts them: speaker notes, scripts, styles and templates dropped, the
    rest read with BeautifulSoup's get_text(" ") with whitespace collapsed, and with its get_text() as the text
    stands, the markup's line breaks and indentation included; the larger counts (a revealed answer's text too)."""
    from bs4 import BeautifulSoup

    found = []
    leaves = [s for s in BeautifulSoup(page, "html.parser").find_all("section") if not s.find("section")]
    for number, section in enumerate(leaves, start=1):  # reveal.js's slide number: every slide is horizontal
        for hidden in section.find_all(["aside", "script", "style", "template"]):
            hidden.decompose()
        text = " ".join(section.get_text(" ").split())
        chars = max(len(text), len(section.get_text().strip()))
        if chars > MAX_SLIDE_CHARS and not section.find(FIGURES):
            found.append(f"slide {number} has {chars} characters and no figure: {text[:60]!r}")
    return found


def test_no_slide_without_a_figure_shows_more_than_a_slide_of_text(built_site):
    decks = sorted((built_site / "slides").glob("*.slides.html"))
    assert len(decks) == len(slides.toc_chapters())
    problems = [f"{deck.name}: {p}" for deck in decks for p in walls_of_text(deck.read_text(encoding="utf-8"))]
    assert not problems, "\n".join(problems)


def test_a_wall_of_text_is_found_and_notes_and_figures_are_not_counted():
    from bs4 import BeautifulSoup

    wall = "word " * 200
    page = (f"<section><section><p>{wall}</p></section><section><p>{wall}</p><img src='x.png' alt=''></section>"
            f"<section><p>short</p><aside class='notes'>{wall}</aside><script>var s = '{wall}';</script></section>"
            f"<section><p>{'w' * (MAX_SLIDE_CHARS - 2)}</p><p class='fragment'>more</p></section></section>")
    assert [p.split(" has")[0] for p in walls_of_text(page)] == ["slide 1", "slide 4"]
    # text that fits collapsed but not as it stands, the markup's indentation included
    indented = "".join(f"\n        <p>\n          {'w' * 40}\n        </p>" for i in range(20))
    assert len(" ".join(BeautifulSoup(indented, "html.parser").get_text(" ").split())) <= MAX_SLIDE_CHARS
    assert [p.split(" has")[0] for p in walls_of_text(f"<section>{indented}</section>")] == ["slide 1"]


def test_the_exporter_counts_a_slide_as_the_checker_does():
    from bs4 import BeautifulSoup

    page = ('<div><h2>Title<a class="anchor-link" href="#t">¶</a></h2><p>a &amp; b <code>x</code>y</p>'
            '<aside class="notes"><p>hidden</p></aside><script>var x = 1;</script><style>p {}</style>'
            '<pre><span class="n">tl</span><span class="o">.</span><span class="n">load</span>(x)\n    <wbr>y</pre>'
            "<noscript><p>no script</p></noscript><template><p>later</p></template></div>")
    soup = BeautifulSoup(page, "html.parser")
    for hidden in soup.find_all(["aside", "script", "style", "template"]):
        hidden.decompose()
    assert slide_text.html_text(page) == " ".join(soup.get_text(" ").split())
    assert slide_text.html_chars(page) == max(len(" ".join(soup.get_text(" ").split())), len(soup.get_text().strip()))
    indented = "<div>\n" + "".join(f"    <p>\n      line {i}\n    </p>\n" for i in range(5)) + "</div>"   # markup's whitespace
    assert slide_text.html_chars(indented) == len(BeautifulSoup(indented, "html.parser").get_text().strip()) > len(
        slide_text.html_text(indented))


def test_listings_are_cut_to_a_slide_of_text_as_their_highlighted_html_reads():
    import inspect

    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    from lab.book import slide_split
    from lab.book.slide_split import CODE_LINES_PER_SLIDE, code_parts

    source = inspect.getsource(slide_split)  # real code: long lines, docstrings, nested blocks
    parts = code_parts(source)
    assert [ln for p in parts for ln in p.splitlines() if ln.strip()] == [ln for ln in source.splitlines() if ln.strip()]
    for part in parts:
        shown = slide_text.html_text(highlight(part, PythonLexer(), HtmlFormatter()))
        assert len(shown) <= slide_text.code_chars(part) <= MAX_SLIDE_CHARS, part[:80]
        assert len(part.splitlines()) <= CODE_LINES_PER_SLIDE


def test_two_functions_too_long_together_are_cut_between_them_and_a_long_line_stays_whole():
    from lab.book.slide_split import code_parts

    def function(name: str) -> str:
        return f"def {name}(x):\n" + "\n".join(f"    x = x + {i}  # add {i} to the running value of x" for i in range(11))

    source = function("first") + "\n\n\n" + function("second")
    assert slide_text.code_chars(source) > MAX_SLIDE_CHARS and len(source.splitlines()) < 28
    parts = code_parts(source)
    assert [p.splitlines()[0] for p in parts] == ["def first(x):", "def second(x):"]
    too_long = "y = " + " + ".join(f"value_{i}" for i in range(200))  # one line longer than a slide's text
    assert code_parts(too_long) == [too_long]
    assert code_parts(f"a = 1\n{too_long}\nb = 2") == ["a = 1", too_long, "b = 2"]  # whole, never re-wrapped


def test_a_long_answer_keeps_its_answer_line_and_its_explanation_continues_in_the_notes():
    from lab.book.quiz import Question, Quiz
    from lab.book.slide_quiz import split_quiz_html

    explanation = " ".join(f"Sentence {i} explains one more step of why the marked option is right." for i in range(30))
    quiz = Quiz("q", [Question("Which option is right?", ["the marked one", "the other one"], 0, explanation)])
    question, answer = split_quiz_html(quiz.to_html(inline_assets=False))
    assert "Sentence 0" not in question and 'class="lab-quiz-question"' in question
    shown, notes = answer.split('<aside class="notes">')
    assert slide_text.html_chars(answer) <= MAX_SLIDE_CHARS
    assert "Self-check 1: answer" in shown and "the marked one" in shown and "Sentence 0 explains" in shown
    assert "Sentence 29 explains" in notes and "Sentence 29" not in shown
    assert "Numbers from" not in shown  # where the numbers come from follows the explanation into the notes


def test_a_question_too_long_for_a_slide_shows_its_setup_first():
    from lab.book.quiz import Question, Quiz
    from lab.book.slide_quiz import split_quiz_html

    setup = " ".join(f"Fact {i} is measured, and the setup of this question states it." for i in range(14))
    options = [f"An option that says {word} at some length, as options in this book do" for word in ("this", "that")]
    quiz = Quiz("q", [Question(setup + " Which option follows?", options, 1, "Because.")])
    opening, question, answer = split_quiz_html(quiz.to_html(inline_assets=False))
    assert "Fact 0 is measured" in opening and "lab-quiz-option" not in opening and "Which option" not in opening
    assert "Which option follows?" in question and "Fact 0" not in question and question.count('class="lab-quiz-option"') == 2
    assert "Self-check 1: answer" in answer
    assert all(slide_text.html_chars(part) <= MAX_SLIDE_CHARS for part in (opening, question, answer))


def test_tables_are_cut_to_a_slide_of_text():
    import pandas as pd

    from lab.book.slide_tables import split_markdown_table, split_table

    why = pd.DataFrame({"rule": [f"rule-{i}" for i in range(6)], "why": ["a reason in a few words, " * 7] * 6})
    parts = split_table(why.to_html(index=False))
    assert len(parts) > 1 and all(slide_text.html_chars(p) <= MAX_SLIDE_CHARS for p in parts)
    assert sum(p.split("<tbody>")[1].count("<tr") for p in parts) == 6
    head = "| time | segment |\n|---|---|\n"
    rows = [f"| {i}–{i + 5} | {'what the class does then, ' * 6}|" for i in range(12)]
    parts = split_markdown_table(head + "\n".join(rows))
    assert len(parts) > 1 and all(p.startswith(head) for p in parts)
    assert [r for p in parts for r in p.splitlines()[2:]] == rows
    assert all(slide_text.markdown_chars(p.replace("|", " ")) <= MAX_SLIDE_CHARS for p in parts)


def test_a_panel_is_cut_between_its_blocks_and_an_introduction_stays_with_what_it_introduces():
    from lab.book.slide_blocks import split_blocks

    item = "<li>" + "a step the panel would run, " * 8 + "</li>"
    page = ('<style>.x {}</style><div class="lab-run-panel"><p><b>Run it</b></p><p>Would run:</p>'
            f"<ul>{item * 3}</ul><p>Or run from a shell:</p><pre>python -m lab {'--flag ' * 30}</pre></div>")
    parts = split_blocks(page)
    assert len(parts) == 2
    assert all(p.startswith('<style>.x {}</style><div class="lab-run-panel">') and p.endswith("</div>") for p in parts)
    assert "Would run:" in parts[0] and "<ul>" in parts[0] and parts[1].index("Or run from a shell:") < parts[1].index("<pre>")
    assert all(slide_text.html_chars(p) <= MAX_SLIDE_CHARS for p in parts)
    assert split_blocks("<p>short</p>") == ["<p>short</p>"]


def test_prose_and_code_that_would_overfill_a_slide_start_the_next_one():
    import nbformat

    prose = " ".join(["Each sentence here is one more thing the slide says."] * 8)
    code = "\n".join(f"total_{i} = compute_something(argument_{i}, other_{i}, third_{i})" for i in range(8))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"## Idea\n\n{prose}"),
                                         nbformat.v4.new_code_cell(code), nbformat.v4.new_markdown_cell(prose)])
    out = slides.to_slides_notebook(nb, {})
    per_slide = []
    for cell in out.cells:
        kind = cell.metadata["slideshow"]["slide_type"]
        if kind == "slide" or not per_slide:
            per_slide.append(0)
        per_slide[-1] += slide_text.cell_chars(cell) if kind != "notes" else 0
    assert len(per_slide) == 3 and max(per_slide) <= MAX_SLIDE_CHARS


def test_a_revealed_answer_that_would_overfill_its_slide_takes_its_question_to_the_next():
    import nbformat

    prose = " ".join(["Each sentence here is one more thing the slide says."] * 8)
    exercise = "**Exercise.** " + " ".join(["Work out one more quantity from the numbers above."] * 4)
    answer = " ".join(["The answer follows from the numbers, step by step."] * 6)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"## Idea\n\n{prose}"),
                                         nbformat.v4.new_markdown_cell(f"{exercise}\n\n:::{{dropdown}} Answer\n{answer}\n:::")])
    out = slides.to_slides_notebook(nb, {})
    kinds = [(c.metadata["slideshow"]["slide_type"], c.source[:12]) for c in out.cells]
    assert kinds == [("slide", "## Idea\n\nEac"), ("slide", "**Exercise.*"), ("fragment", "The answer f")]

"""Quizzes: well-formed questions, answers that match the data they cite, HTML that works with and
without Sphinx; and every {glue} number of the interview and course-kit chapters resolves."""

import csv
import html
import importlib
import re
import shutil
import subprocess

import pytest

from lab import REPO_ROOT, LabError
from lab.book import quiz, quizzes, quoted
from lab.book.quiz import Computed, Measured, Question, Quiz, measured
from lab.results import reference

A10G = reference.DATASET
ALL = [(chapter, i, q) for chapter in quizzes.CHAPTERS for i, q in enumerate(quizzes.module_of(chapter).questions())]


def _raw_cell(m: Measured):
    """The cited cell read with the csv module (not through lab), to check lab's lookup independently."""
    from lab.results import data

    with open(data.DATA_DIR / m.dataset / m.table, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if all(r[k] == str(v) for k, v in m.where)]
    assert len(rows) == 1, f"{m.source()}: {len(rows)} rows"
    cell = rows[0][m.column]
    try:
        return float(cell)
    except ValueError:
        return cell


def _measured_leaves(number):
    if isinstance(number, Measured):
        yield number
    elif isinstance(number, Computed):
        for n in number.inputs:
            yield from _measured_leaves(n)


@pytest.mark.parametrize("chapter,index,question", ALL, ids=[f"{c}-{i}" for c, i, _ in ALL])
def test_question_is_valid_and_its_answer_matches_the_data(chapter, index, question):
    rendered = question.validate()  # one correct index, distinct options, no typed numerals, claim holds
    assert 0 <= question.correct < len(question.options)
    assert len(set(rendered.options)) == len(rendered.options)
    values = question.values()
    if question.holds is not None:
        assert question.holds(values), f"{chapter} #{index}: the data contradicts the marked answer"
    shown = rendered.prompt + rendered.answer + rendered.explanation
    for name, number in question.cites.items():
        for leaf in _measured_leaves(number):
            raw = _raw_cell(leaf)
            assert leaf.value() == raw, f"{leaf.source()}: lab read {leaf.value()!r}, the file holds {raw!r}"
        assert number.text() in shown, f"{chapter} #{index}: cited {name}={number.text()} is not shown"
    # every numeral in the right answer is one of the cited numbers, never typed
    cited = {n.text() for n in question.cites.values()}
    for numeral in quiz._NUMERAL.findall(rendered.answer):
        assert numeral in cited, f"{chapter} #{index}: {numeral!r} in the answer is not a cited number"


QUIZ_CALL = re.compile(r"from lab\.book\.quizzes import (\w+)\s+\1\.quiz\(\)")


def _toc_chapters() -> list[str]:
    """Every chapter file stem listed in _toc.yml, root included."""
    import yaml

    toc = yaml.safe_load((REPO_ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = [toc["root"]] + [c["file"] for part in toc.get("parts", []) for c in part.get("chapters", [])]
    return [f.rsplit("/", 1)[-1] for f in files]


def test_every_chapter_with_a_quiz_shows_its_own_and_has_a_few_questions():
    with_quiz = {}
    for stem in _toc_chapters():
        path = REPO_ROOT / "book" / f"{stem}.md"
        modules = QUIZ_CALL.findall(path.read_text(encoding="utf-8")) if path.exists() else []
        keys = [importlib.import_module(f"lab.book.quizzes.{m}").KEY for m in modules]
        if keys:
            with_quiz[stem] = keys
    assert with_quiz, "no chapter in _toc.yml shows a quiz"
    for stem, keys in with_quiz.items():
        assert keys == [stem], f"{stem}.md shows the quiz of {keys}, not its own"
        assert len(quizzes.module_of(stem).quiz().questions) >= 3, f"{stem}: fewer than three questions"
    unused = set(quizzes.CHAPTERS) - set(with_quiz)
    assert not unused, f"quizzes no chapter in _toc.yml shows: {sorted(unused)}"


def _as_seen(chapter: str) -> list[tuple[list[str], int]]:
    """Each question of a chapter's quiz as the page shows it: its options in order, and the right one's index."""
    page = quizzes.module_of(chapter).quiz().to_html(inline_assets=False)
    seen = []
    for block in page.split('class="lab-quiz-question"')[1:]:
        answer = int(re.search(r'data-answer="(\d+)"', block).group(1))
        options = re.findall(r'data-option="\d+"><span class="lab-quiz-letter">\w</span> (.*?)</button>', block)
        seen.append(([html.unescape(re.sub(r"</?code>", "", o)) for o in options], answer))
    return seen


def test_quizzes_do_not_give_the_answer_away():
    """Over every question the reader sees: no letter is right in more than 40% of them, and the right option
    is the (strictly) longest in at most 40%, and the shortest in at most 40%."""
    seen = [q for chapter in quizzes.CHAPTERS for q in _as_seen(chapter)]
    total = len(seen)
    letters = {}
    longest = shortest = 0
    for options, answer in seen:
        letters[quiz.LETTERS[answer]] = letters.get(quiz.LETTERS[answer], 0) + 1
        right, others = len(options[answer]), [len(o) for i, o in enumerate(options) if i != answer]
        longest += right > max(others)
        shortest += right < min(others)
    assert max(letters.values()) <= 0.4 * total, f"right answers by letter: {letters} of {total}"
    assert longest <= 0.4 * total, f"the right option is the longest in {longest} of {total} questions"
    assert shortest <= 0.4 * total, f"the right option is the shortest in {shortest} of {total} questions"


def test_answer_slots_rotate_and_keep_the_answer():
    q = quizzes.module_of("05-decode-split-kv").quiz()
    slots = [q.questions[i].render().shuffled(q.answer_slot(i)).correct for i in range(len(q.questions))]
    assert len(set(slots)) == min(len(q.questions), 4)
    for i, question in enumerate(q.questions):
        r = question.render().shuffled(q.answer_slot(i))
        assert r.answer == question.render().answer and sorted(r.options) == sorted(question.render().options)


def test_numbers_in_answers_come_from_the_data_when_it_changes(tmp_path, monkeypatch):
    # Point a Measured at a copy of the table with a changed value: the rendered text follows the file.
    src = REPO_ROOT / "data" / A10G
    dst = tmp_path / "copy"
    shutil.copytree(src, dst)
    table = (dst / "fits.csv").read_text().replace("3688.6", "4000.0")
    (dst / "fits.csv").write_text(table)
    m = measured(str(dst), "fits.csv", "c_ps_per_token2", ".1f", arm="FLASH_ATTN")
    assert m.text() == "4000.0"


def _q(**kw):
    base = dict(prompt="p?", options=["right", "wrong"], correct=0, explanation="because")
    base.update(kw)
    return Question(**base)


@pytest.mark.parametrize("kwargs,message", [
    (dict(options=["only one"]), "at least two options"),
    (dict(correct=2), "not the index of an option"),
    (dict(correct=-1), "not the index of an option"),
    (dict(options=["About 37.3 ms", "About 91.8 ms"]), "types the number"),
    (dict(options=["Same", " same "]), "read the same"),
    (dict(options=["{x} ms", "no"]), "no entry in cites"),
    (dict(cites={"x": Computed("seven", lambda: 7.0)}), "never shows it"),
    (dict(options=["{x} ms", "{y} ms"], cites={"x": Computed("a", lambda: 1.04), "y": Computed("b", lambda: 0.96)}),
     "read the same"),  # two different values that print the same are ambiguous
    (dict(options=["{x}", "no"], cites={"x": Computed("a", lambda: 1.0)}, holds=lambda v: v["x"] > 2), "no longer supports"),
])
def test_malformed_questions_are_rejected(kwargs, message):
    with pytest.raises(LabError, match=message):
        _q(**kwargs).validate()


def test_a_cite_that_matches_several_rows_is_an_error():
    with pytest.raises(LabError, match="2 rows match"):
        Measured(A10G, "fits.csv", "a_s", ()).value()


def test_numerals_inside_names_are_not_typed_numbers():
    _q(options=["FA3 on the H200", "FA2 on the A10G"]).validate()


def test_html_has_the_hooks_and_hides_answers(monkeypatch):
    monkeypatch.setenv("LAB_STATIC", "1")
    q = quizzes.module_of("06-vllm-sweeps").quiz()
    page = q._repr_html_()
    assert 'data-quiz="06-vllm-sweeps"' in page
    assert "<script" not in page and "<style" not in page  # the static site loads quiz.js/quiz.css itself
    blocks = page.split('class="lab-quiz-question"')[1:]
    assert len(blocks) == len(q.questions)
    for question, block in zip(q.questions, blocks, strict=True):
        options = re.findall(r'data-option="(\d+)"', block)
        assert options == [str(i) for i in range(len(question.options))]
        assert re.search(r"data-feedback hidden", block)
        answer = int(re.search(r'data-answer="(\d+)"', block).group(1))
        shown = re.findall(r'data-option="\d+"><span class="lab-quiz-letter">\w</span> (.*?)</button>', block)
        assert shown[answer] == quiz._inline(question.render().answer)


def test_live_kernel_output_carries_the_script_and_style(monkeypatch):
    monkeypatch.delenv("LAB_STATIC", raising=False)
    page = quizzes.module_of("01-roofline").quiz()._repr_html_()
    assert page.count("<script>") == 1 and "labQuizInstalled" in page
    assert page.count("<style>") == 1 and ".lab-quiz-right" in page


def test_option_order_is_shuffled_but_stable():
    rendered = [q.render() for _, _, q in ALL]
    positions = {r.shuffled().correct for r in rendered}
    assert len(positions) > 1, "the right answer sits at the same letter in every question"
    for r in rendered:
        s = r.shuffled()
        assert s.answer == r.answer and sorted(s.options) == sorted(r.options)
        assert s == r.shuffled()


def test_unknown_chapter_and_bad_key():
    with pytest.raises(LabError, match="no quiz for chapter"):
        quizzes.module_of("99-nothing").quiz()
    with pytest.raises(LabError, match="lowercase"):
        Quiz("Bad Key", [_q()])


def test_static_assets_are_configured():
    config = (REPO_ROOT / "_config.yml").read_text()
    assert re.search(r"html_js_files: \[[^\]]*quiz\.js", config)
    assert re.search(r"html_css_files: \[[^\]]*quiz\.css", config)
    assert quiz.QUIZ_JS.exists() and quiz.QUIZ_CSS.exists()
    assert "http" not in quiz.QUIZ_JS.read_text() and "url(" not in quiz.QUIZ_CSS.read_text()


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_quiz_js_parses():
    subprocess.run(["node", "--check", str(quiz.QUIZ_JS)], check=True)


# --- glue: every number the interview and course-kit chapters show is glued on the same page -------

GLUE_ROLE = re.compile(r"\{glue(?::\w+)?\}`([^`]+)`")
CODE_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```", re.S | re.M)


def _glued_names(md_text: str) -> dict:
    """Run the page's code cells with myst_nb.glue replaced by a recorder; return name -> value."""
    import myst_nb

    recorded = {}
    original = myst_nb.glue
    myst_nb.glue = lambda name, value, display=True: recorded.__setitem__(name, value)
    try:
        namespace = {}
        for cell in CODE_CELL.findall(md_text):
            source = "\n".join(line for line in cell.splitlines() if not line.startswith(":"))
            exec(compile(source, "<cell>", "exec"), namespace)
    finally:
        myst_nb.glue = original
    return recorded


@pytest.mark.parametrize("chapter", ["08-interview-prep", "09-course-kit"])
def test_every_glue_role_resolves(chapter):
    path = REPO_ROOT / "book" / f"{chapter}.md"
    if not path.exists():
        pytest.skip(f"{path.name} not written yet")
    try:
        quoted.registry_folder()
    except LabError:
        pytest.skip("the page quotes the fact registry of a site build (_build/facts): none here")
    text = path.read_text(encoding="utf-8")
    roles = GLUE_ROLE.findall(text)
    assert roles, f"{path.name} glues nothing"
    glued = _glued_names(text)
    from myst_nb.core.variables import format_plain_text

    for role in roles:
        name, _, spec = role.partition(":")
        assert name in glued, f"{path.name}: {{glue}}`{role}` names nothing glued on the page"
        format_plain_text(repr(glued[name]), spec)  # the format spec fits the value (raises otherwise)


# --- in a real browser (Debian's chromium through Playwright; skipped where there is none) ----------

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser_page(tmp_path_factory):
    """A function that opens a local file in headless chromium and returns (page, problems).

    Any request that is not a local file or data: URL is aborted and recorded, as are console errors.
    """
    from pathlib import Path

    if not Path(CHROMIUM).exists():
        pytest.skip(f"chromium not found at {CHROMIUM}")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium")), executable_path=CHROMIUM, headless=True,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                  "--allow-file-access-from-files"])
        problems: list[str] = []

        def route(r):
            if r.request.url.startswith(("file://", "data:", "blob:")):
                r.continue_()
            else:
                problems.append(f"remote request: {r.request.url}")
                r.abort()

        context.route("**/*", route)

        def open_file(path):
            page = context.new_page()
            page.on("console", lambda m: m.type == "error" and problems.append(f"console error: {m.text}"))
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
            page.goto(Path(path).as_uri(), wait_until="load")
            return page, problems

        try:
            yield open_file
        finally:
            context.close()


def _click_through(page, quiz_key: str, questions) -> None:
    root = page.locator(f'[data-quiz="{quiz_key}"]')
    for qi, question in enumerate(questions):
        block = root.locator(f'[data-question="{qi}"]')
        answer = int(block.get_attribute("data-answer"))
        feedback = block.locator("[data-feedback]")
        assert feedback.is_hidden(), "the explanation shows before the reader commits"
        wrong = (answer + 1) % len(question.options)
        block.locator(f'[data-option="{wrong}"]').click()
        assert feedback.is_visible()
        assert feedback.locator("[data-verdict]").inner_text().startswith("Not quite")
        assert "lab-quiz-right" in block.locator(f'[data-option="{answer}"]').get_attribute("class")
        assert block.locator(f'[data-option="{answer}"]').is_disabled()  # committed: no second pick
        block.locator(".lab-quiz-retry").click()
        assert feedback.is_hidden()
        block.locator(f'[data-option="{answer}"]').click()
        assert feedback.locator("[data-verdict]").inner_text() == "Right."
        assert question.render().explanation[:40] in feedback.inner_text().replace("\n", " ")


@pytest.mark.browser
@pytest.mark.parametrize("face", ["live", "static"])
def test_quiz_answers_in_a_browser(browser_page, tmp_path, monkeypatch, face):
    q = quizzes.module_of("05-decode-split-kv").quiz()
    if face == "live":  # a Jupyter output: style and script inline
        monkeypatch.delenv("LAB_STATIC", raising=False)
        head = ""
    else:  # the built site: Sphinx links the static files
        monkeypatch.setenv("LAB_STATIC", "1")
        head = (f'<link rel="stylesheet" href="{quiz.QUIZ_CSS.as_uri()}">'
                f'<script src="{quiz.QUIZ_JS.as_uri()}"></script>')
    page_file = tmp_path / "quiz.html"
    page_file.write_text(f"<!doctype html><html><head><meta charset='utf-8'>{head}</head>"
                         f"<body>{q._repr_html_()}{q._repr_html_().replace('data-quiz=', 'data-quiz-copy=')}</body></html>")
    page, problems = browser_page(page_file)
    _click_through(page, q.key, q.questions)
    assert problems == []

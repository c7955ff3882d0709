"""Quizzes: well-formed questions, answers that match the data they cite, HTML that works with and
without Sphinx; and every {glue} number of the interview and course-kit chapters resolves."""

import csv
import re
import shutil
import subprocess

import pytest

from lab import REPO_ROOT, LabError
from lab.book import quiz, quizzes
from lab.book.quiz import Computed, Measured, Question, Quiz, measured

A10G = quizzes.A10G
ALL = [(chapter, i, q) for chapter, make in quizzes.CHAPTERS.items() for i, q in enumerate(make())]


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


def test_every_chapter_has_a_few_questions():
    for chapter, make in quizzes.CHAPTERS.items():
        assert len(make()) >= 3, chapter


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
    q = quizzes.chapter_quiz("06-vllm-sweeps")
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
    page = quizzes.chapter_quiz("01-roofline")._repr_html_()
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
        quizzes.chapter_quiz("99-nothing")
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
    text = path.read_text(encoding="utf-8")
    roles = GLUE_ROLE.findall(text)
    assert roles, f"{path.name} glues nothing"
    glued = _glued_names(text)
    from myst_nb.core.variables import format_plain_text

    for role in roles:
        name, _, spec = role.partition(":")
        assert name in glued, f"{path.name}: {{glue}}`{role}` names nothing glued on the page"
        format_plain_text(repr(glued[name]), spec)  # the format spec fits the value (raises otherwise)


def test_interview_h200_sentences_say_when_not_measured():
    from lab.book import interview

    h200 = interview.h200_facts()
    assert set(h200) == {"h200_fa3_vs_flex", "h200_fa3_vs_fa2", "h200_decode_fa3", "h200_decode_flex", "h200_chunk",
                         "h200_decode_kernels", "h200_control", "h200_occupancy", "h200_rounds"}
    for sentence in h200.values():
        assert (sentence == interview.H200_MISSING or "H200" in sentence or "GB/s" in sentence or "chunks" in sentence
                or "MHz" in sentence)


def test_decode_reconciliation_numbers():
    from lab.book import interview

    f = interview.a10g_facts()
    # split-KV pulls most of the bandwidth on the extra KV bytes; the un-split kernel a small fraction
    assert f["kv_bw_flash_pct"] > 50 > 20 > f["kv_bw_flex_pct"]
    # a bandwidth-bound step's growth is what the extra bytes predict (hand check: 57,344 B/token)
    assert f["kv_kb_per_token"] == pytest.approx(2 * 28 * 4 * 128 * 2 / 1e3)
    assert f["floor_long_ms"] - f["floor_short_ms"] == pytest.approx(
        (30720 - 256) * 57344 / 600e9 * 1e3, rel=1e-9)


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
    q = quizzes.chapter_quiz("05-decode-split-kv")
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


# --- once H200 sweeps exist: sentences and questions switch on, numbers from those files ------------

@pytest.fixture
def with_h200(tmp_path, monkeypatch):
    """A data/ tree with the A10G reference and a synthetic H200 study of three arms (FA3 fastest)."""
    import functools
    import json

    import pandas as pd

    from lab.results import data

    root = tmp_path / "data"
    shutil.copytree(REPO_ROOT / "data" / A10G, root / A10G)
    lengths = [256, 2048, 8192, 32768]
    arms = {"FLASH_ATTN/FA3": (0.5, 5.0, 0.05), "FLASH_ATTN/FA2": (0.8, 5.5, 0.06), "FLEX_ATTENTION": (2.0, 6.0, 1.5)}
    for arm, (ttft_scale, itl0, itl_slope) in arms.items():
        folder = root / "h200" / "vllm0.26-qwen2.5-7b" / arm.replace("/", "-")
        folder.mkdir(parents=True)
        rows = [dict(arm=arm, backend=arm.split("/")[0], target_len=n, actual_len=n, ttft_s=ttft_scale * n / 8192,
                     prefill_ms_per_token=ttft_scale / 8.192, itl_ms=itl0 + itl_slope * n / 1024, status="ok")
                for n in lengths]
        pd.DataFrame(rows).to_csv(folder / "sweep.csv", index=False)
        (folder / "provenance.json").write_text(json.dumps(dict(
            kind="vllm-sweep", gpu="NVIDIA H200", driver="x", cuda="x", torch="x", triton="x", vllm="0.26.0",
            model="Qwen2.5-7B", dtype="bfloat16", flags={"max_num_batched_tokens": 8192}, date="2026-11-30",
            command="python -m lab vllm-sweep ...")))
    monkeypatch.setattr(data, "DATA_DIR", root)
    monkeypatch.setattr(data, "load_sweeps", functools.partial(data.load_sweeps, root=root))
    original_datasets = data.datasets
    monkeypatch.setattr(data, "datasets", lambda kind=None, root=root: original_datasets(kind, root=root))
    return root


def test_h200_data_switches_on_sentences_and_questions(with_h200):
    from lab.book import interview

    h200 = interview.h200_facts()
    assert h200["h200_decode_kernels"] == interview.H200_MISSING  # this tree has no kernel benchmark
    assert h200["h200_control"] == interview.H200_MISSING        # nor a census capture
    kernel_facts = ("h200_decode_kernels", "h200_control", "h200_occupancy", "h200_rounds")
    assert all(h200[k] == interview.H200_MISSING for k in kernel_facts)
    assert interview.H200_MISSING not in [v for k, v in h200.items() if k not in kernel_facts]
    assert "32,768 tokens, TTFT was 2.00 s with FLASH_ATTN/FA3 and 8.00 s with FLEX_ATTENTION (4.0×)" in h200["h200_fa3_vs_flex"]
    assert "3.20 s with FLASH_ATTN/FA2" in h200["h200_fa3_vs_fa2"]
    assert h200["h200_chunk"] == "the H200 runs prefilled in chunks of 8,192 tokens"
    assert h200["h200_decode_fa3"].startswith("FLASH_ATTN/FA3 went from 5.0 ms at 256 tokens to 6.6 ms at 32,768")
    extra = quizzes.vllm_sweeps()[3:]
    assert len(extra) == 2
    for question in extra:
        rendered = question.validate()
        for number in question.cites.values():
            for leaf in _measured_leaves(number):
                assert leaf.dataset.startswith("h200/") and leaf.value() == _raw_cell(leaf)
    assert "2.00 s with FlashAttention 3 and 3.20 s" in extra[0].render().prompt
    assert rendered.answer.startswith("FA3 spreads the KV read")


def test_h200_decode_kernel_sentence_reads_the_benchmark():
    from lab.book import interview
    from lab.results import data

    if not (data.DATA_DIR / interview.KERNELS / "decode.csv").exists():
        pytest.skip("no H200 kernel benchmark committed yet")
    sentence = interview.h200_decode_kernels_sentence()
    table = data.load(interview.KERNELS).csv("decode.csv")
    n = int(re.search(r"at ([\d,]+) tokens", sentence).group(1).replace(",", ""))
    row = table[(table["candidate"] == "flex") & (table["batch"] == 1) & (table["n"] == n)].iloc[0]
    assert f"FlexAttention {100 * row['bw_fraction']:.0f}%" in sentence


def test_h200_control_sentence_reads_the_census_and_the_clocks():
    from lab.book import interview
    from lab.results import census_windows as census_data

    sentence = interview.h200_control_sentence()
    if sentence == interview.H200_MISSING:
        pytest.skip("no H200 census with clock samples committed")
    clocks = census_data.window_clocks()
    clocks = clocks[(clocks.gpu == "H200") & (clocks.window == "prefill-28672")].set_index("backend")
    for backend in census_data.BACKENDS:
        assert f"{clocks.loc[backend, 'matmul_ms']:,.0f} ms" in sentence
        assert f"{clocks.loc[backend, 'sm_mhz_median']:,.0f} MHz" in sentence


def test_h200_occupancy_sentence_reads_the_tuning_runs():
    from lab.book import interview
    from lab.results import data, tuning

    sentence = interview.h200_occupancy_sentence()
    if sentence == interview.H200_MISSING:
        pytest.skip("no tuning runs with resources committed")
    pairs = tuning.register_cap_pairs(data.load(interview.KERNELS).csv("tuning_forward.csv"))
    best = pairs.loc[pairs.speedup.idxmax()]
    assert f"took {best.ms:.2f} ms" in sentence and f"took {best.ms_capped:.2f} ms" in sentence
    assert f"capped at {best.cap} registers" in sentence and not sentence.endswith(".")


def test_h200_rounds_sentence_compares_blocks_with_rounds():
    from lab.book import interview

    sentence = interview.h200_rounds_sentence()
    if sentence == interview.H200_MISSING:
        pytest.skip("no kernel runs timed both ways committed")
    blocks, rounds = re.findall(r"(\d\.\d\d)–(\d\.\d\d) ", sentence)
    assert float(blocks[0]) <= float(blocks[1]) and float(rounds[0]) <= float(rounds[1])
    assert sentence.startswith("on the H200") and "over 5 runs" in sentence


def test_h200_kernel_sentences_without_data_say_not_measured(tmp_path):
    from lab.book import interview

    assert interview.h200_occupancy_sentence(root=tmp_path) == interview.H200_MISSING
    assert interview.h200_rounds_sentence(root=tmp_path) == interview.H200_MISSING

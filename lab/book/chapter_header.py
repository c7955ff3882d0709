"""What a reader wants to know before starting a chapter, as one line under its title.

Each chapter page gets a line like "About 14 min to read · Runs anywhere … · Before this: … · Slides":
the reading time is counted from the chapter's prose at build time, what runs where and what to read
first come from :data:`CHAPTERS`, and the slide link points at the deck ``python -m lab slides``
writes next to the site. :func:`setup` hooks this into Sphinx (``lab.book.sphinxext`` loads it), and
the same hook offers each chapter's executed notebook (outputs included) as the ``.ipynb`` download.
"""

from __future__ import annotations

import html
import math
import shutil
from dataclasses import dataclass
from pathlib import Path

from docutils import nodes
from lab.book.slides import NOT_DECKS

#: Words per minute of careful technical reading (prose only: code and outputs are not counted).
READING_WPM = 200

RUNS_ANYWHERE = "Runs anywhere: every number comes from the cached measurements in data/"
LIVE_NEEDS_GPU = RUNS_ANYWHERE + "; the live cells need an NVIDIA GPU"


@dataclass(frozen=True)
class ChapterInfo:
    runs: str
    before: tuple[str, ...] = ()  # stems of the chapters to read first


CHAPTERS: dict[str, ChapterInfo] = {
    "intro": ChapterInfo(RUNS_ANYWHERE),
    "01-roofline": ChapterInfo(RUNS_ANYWHERE + "; its live cell times the machine that runs it (any CPU)"),
    "02-naive-attention": ChapterInfo(RUNS_ANYWHERE, ("01-roofline",)),
    "03-tiling-online-softmax": ChapterInfo(RUNS_ANYWHERE + " (NumPy on a CPU)", ("02-naive-attention",)),
    "04-flashattention-triton": ChapterInfo(LIVE_NEEDS_GPU + " (Triton)", ("03-tiling-online-softmax",)),
    "04b-backward-pass": ChapterInfo(LIVE_NEEDS_GPU + " (Triton; the check runs on a CPU too)",
                                     ("04-flashattention-triton",)),
    "05-decode-split-kv": ChapterInfo(LIVE_NEEDS_GPU + " (Triton)", ("04-flashattention-triton",)),
    "05b-paged-attention": ChapterInfo(RUNS_ANYWHERE, ("05-decode-split-kv",)),
    "06-vllm-sweeps": ChapterInfo(RUNS_ANYWHERE + "; new sweeps need a GPU and vLLM", ("01-roofline", "02-naive-attention")),
    "06b-busy-server": ChapterInfo(RUNS_ANYWHERE + "; a new load point needs a GPU and vLLM", ("06-vllm-sweeps",)),
    "06c-our-kernels-in-vllm": ChapterInfo(RUNS_ANYWHERE + "; serving with the book's kernels needs a GPU and vLLM",
                                           ("05b-paged-attention", "06-vllm-sweeps")),
    "07-the-trace": ChapterInfo(RUNS_ANYWHERE + "; capturing a new trace needs a GPU and vLLM", ("06-vllm-sweeps",)),
    "08-interview-prep": ChapterInfo(RUNS_ANYWHERE, ("01-roofline", "06-vllm-sweeps")),
    "09-course-kit": ChapterInfo(RUNS_ANYWHERE, ("intro",)),
    "appendix-method": ChapterInfo(RUNS_ANYWHERE, ("04-flashattention-triton", "05-decode-split-kv")),
}


def reading_minutes(words: int) -> int:
    return max(1, math.ceil(words / READING_WPM))


def prose_words(doctree) -> int:
    """Words in the page's paragraphs, leaving out code, cell outputs and raw HTML."""
    count = 0
    for paragraph in doctree.findall(nodes.paragraph):
        if any(type(a).__name__ in ("CellOutputNode", "CellOutputsNode", "container") and "cell_output" in
               (a.get("classes") or []) for a in _ancestors(paragraph)):
            continue
        count += len(paragraph.astext().split())
    return count


def _ancestors(node):
    node = node.parent
    while node is not None:
        yield node
        node = node.parent


def header_html(stem: str, minutes: int, titles: dict[str, str], link, deck: str | None) -> str:
    """The line under a chapter's title; ``link(stem)`` is the relative URL of another chapter."""
    info = CHAPTERS[stem]
    parts = [f"About {minutes} min to read", html.escape(info.runs)]
    if info.before:
        names = ", ".join(f'<a href="{link(s)}">{html.escape(titles.get(s, s))}</a>' for s in info.before)
        parts.append(f"Before this: {names}")
    if deck:
        parts.append(f'<a href="{deck}">Slides</a>')
    return '<p class="lab-chapter-meta">' + " · ".join(parts) + "</p>"


def _insert_header(app, doctree, docname) -> None:
    stem = Path(docname).name
    if stem not in CHAPTERS or app.builder.format != "html":
        return
    sections = list(doctree.findall(nodes.section))
    if not sections or not isinstance(sections[0][0], nodes.title):
        return
    env = app.builder.env
    titles = {Path(d).name: env.titles[d].astext() for d in env.titles}
    folder = Path(docname).parent.as_posix()

    def link(other: str) -> str:
        return app.builder.get_relative_uri(docname, f"{folder}/{other}" if folder != "." else other)

    deck = None if stem in NOT_DECKS else ("../" * docname.count("/")) + f"slides/{stem}.slides.html"
    raw = header_html(stem, reading_minutes(prose_words(doctree)), titles, link, deck)
    sections[0].insert(1, nodes.raw("", raw, format="html"))


def _offer_executed_notebook(app, pagename, templatename, context, doctree) -> None:
    """Copy the executed notebook next to the page's sources and let the download menu offer it."""
    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    if doctree is None or not executed.exists():
        return
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(executed, target)
    context["ipynb_source"] = f"{pagename}.ipynb"


def setup(app):
    app.connect("doctree-resolved", _insert_header)
    app.connect("html-page-context", _offer_executed_notebook, priority=400)  # before the theme's buttons (501)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}

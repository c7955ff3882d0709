"""Cutting a chapter's code-cell outputs into slides that fit: one figure, explorer or table part each.

A deck is read with → alone, so every figure, table and explorer sits on a horizontal slide of its
own (never on a vertical sub-slide, which → skips). A table with more rows than a slide holds is
cut into parts of at most :data:`TABLE_ROWS_PER_SLIDE` rows, each repeating the header, and a
self-check quiz into one slide per question; what still does not fit is scaled down in the browser
by the deck template (``slides_template``).
"""

from __future__ import annotations

import copy
import re

#: Body rows of an HTML table on one slide (a 700 px slide at the deck's 20 px text holds about 14).
TABLE_ROWS_PER_SLIDE = 12

_TBODY = re.compile(r"(?P<head>.*?<tbody>)(?P<rows>.*?)(?P<tail></tbody>.*)", re.S)
_ROW = re.compile(r"<tr\b.*?</tr>", re.S)


def split_table_html(page: str, rows_per_part: int = TABLE_ROWS_PER_SLIDE) -> list[str]:
    """``page`` (HTML holding one table) as parts of at most ``rows_per_part`` body rows, header repeated."""
    if page.count("<table") != 1:
        return [page]
    m = _TBODY.match(page)
    if m is None:
        return [page]
    rows = _ROW.findall(m["rows"])
    if len(rows) <= rows_per_part:
        return [page]
    return [m["head"] + "\n" + "\n".join(rows[i:i + rows_per_part]) + "\n" + m["tail"]
            for i in range(0, len(rows), rows_per_part)]


_QUIZ = re.compile(r'(?P<head>.*?<div class="lab-quiz" [^>]*>\s*<p class="lab-quiz-title">.*?</p>)(?P<body>.*?)'
                   r'(?P<tail><noscript>.*)', re.S)
_QUESTION = re.compile(r'<div class="lab-quiz-question".*?</div></div>', re.S)


def split_quiz_html(page: str) -> list[str]:
    """A quiz (``lab.book.quiz``'s markup) as one part per question, each a quiz of its own."""
    m = _QUIZ.match(page)
    questions = _QUESTION.findall(m["body"]) if m else []
    if len(questions) < 2:
        return [page]
    return [m["head"] + "\n" + q + "\n" + m["tail"] for q in questions]


def _html(output: dict) -> str | None:
    data = output.get("data") or {}
    text = data.get("text/html")
    if text is None or any(k.startswith("image/") for k in data):
        return None
    return "".join(text) if isinstance(text, list) else text


def is_rich(output: dict) -> bool:
    """A figure, table or explorer: something that gets a slide of its own."""
    return any(k.startswith("image/") or k == "text/html" for k in (output.get("data") or {}))


def output_slides(outputs: list[dict]) -> list[list[dict]]:
    """Outputs grouped into slides: plain text stays with what precedes it; each rich output (each
    part of a long table) starts a slide of its own."""
    slides: list[list[dict]] = [[]]
    for output in outputs:
        if not is_rich(output):
            slides[-1].append(output)
            continue
        page = _html(output)
        parts = (split_quiz_html(page) if 'class="lab-quiz"' in page else split_table_html(page)) if page else [None]
        for part in parts:
            piece = output
            if part is not None and len(parts) > 1:
                piece = copy.deepcopy(output)
                piece["data"]["text/html"] = part
            if slides[-1] and any(is_rich(o) for o in slides[-1]):
                slides.append([])
            slides[-1].append(piece)
    return [s for s in slides if s] or [[]]


#: Lines of code or printed text that share a slide with the prose before them; more get a slide of their own.
SHARED_LINES = 8


def needs_own_slide(source: str, outputs: list[dict], show_source: bool) -> bool:
    """A figure, table or explorer, or code and printed text longer than :data:`SHARED_LINES`."""
    if any(is_rich(o) for o in outputs):
        return True
    text = "".join("".join(o.get("text", "")) + "".join((o.get("data") or {}).get("text/plain", "")) for o in outputs)
    lines = (source.count("\n") + 1 if show_source and source.strip() else 0) + text.count("\n")
    return lines > SHARED_LINES


def markdown_blocks(lines: list[str]) -> list[str]:
    """Blank-line separated blocks, never splitting a fenced code block or $$ math."""
    blocks, current, fence = [], [], None
    for line in lines:
        marker = re.match(r"^(`{3,}|~{3,}|\$\$)", line.strip())
        if marker:
            token = marker.group(1)
            fence = None if fence and token.startswith(fence[0]) else (fence or token)
        if not line.strip() and fence is None:
            if current:
                blocks.append("\n".join(current))
                current = []
        else:
            current.append(line)
    if current:
        blocks.append("\n".join(current))
    return blocks


def fragment_cells(lines: list[str], budget: int) -> list[tuple[str, str]]:
    """A revealed answer: its opening (up to the slide's text budget) appears on the next key press; a
    table in it gets a slide of its own and the rest of a long answer goes to the notes, so nothing on
    the slide is shrunk to unreadable text."""
    shown, tables, notes, used = [], [], [], 0
    for block in markdown_blocks(lines):
        if block.lstrip().startswith("|"):
            tables.append(block)
        elif not shown or (used + len(block) <= budget and not notes):
            shown.append(block)
            used += len(block)
        else:
            notes.append(block)
    cells = [("fragment", "\n\n".join(shown))] + [("slide", table) for table in tables]
    return cells + ([("notes", "\n\n".join(notes))] if notes else [])

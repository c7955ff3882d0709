"""Cutting a chapter's code cells into slides that fit: one figure, explorer or table part each.

A deck is read with → alone, so every figure, table and explorer sits on a horizontal slide of its
own (never on a vertical sub-slide, which → skips). A table too wide or too tall for a slide is cut
into parts that fit, or summarised with a link to the chapter (:mod:`lab.book.slide_tables`); a
self-check quiz becomes a slide per question and one for its answer (:mod:`lab.book.slide_quiz`); any other
HTML output too long for a slide is cut between its blocks (:mod:`lab.book.slide_blocks`); a long listing or
printed text continues on further slides (code shown by function object, :func:`lab.book.show.show`, a function
per slide), and an explorer's caption goes to the speaker notes so the explorer has the slide. No part shows more
text than :data:`lab.book.slide_text.MAX_SLIDE_CHARS`, counted with what shares its slide. Code is never
re-wrapped: its indentation is its syntax. The deck template (``slides_template``) scales a slide that still runs over down a little, never a
code slide below its readable size; tests/test_slides.py checks that no text ends up too small.
"""

from __future__ import annotations

import copy
import html
import re

from lab.book.slide_blocks import split_blocks
from lab.book.slide_quiz import split_quiz_html
from lab.book.slide_tables import split_markdown_table, split_table, summary_html
from lab.book.slide_text import MAX_SLIDE_CHARS, code_chars, output_chars, text_chars


def _html(output: dict) -> str | None:
    data = output.get("data") or {}
    text = data.get("text/html")
    if text is None or any(k.startswith("image/") for k in data):
        return None
    return "".join(text) if isinstance(text, list) else text


def is_rich(output: dict) -> bool:
    """A figure, table or explorer: something that gets a slide of its own."""
    return any(k.startswith("image/") or k == "text/html" for k in (output.get("data") or {}))


def _parts(page: str, chapter_url: str, room: int = MAX_SLIDE_CHARS) -> list[str]:
    """An HTML output as the pages of its slides, each with at most ``room`` characters of text: a quiz as each
    question and its answer, an explorer whole (its readouts are a table, its controls' text grows with the data it
    offers: neither makes it a table to cut), a table in parts that fit, anything else cut between its blocks."""
    if 'class="lab-quiz"' in page:
        return split_quiz_html(page)
    if "data-explorer=" in page:
        return [page]
    if "<table" not in page.lower():
        return split_blocks(page, room)
    return split_table(page, room) or [summary_html(page, chapter_url)]


class _Slides:
    """Outputs grouped into slides as they come, and the characters of text on the slide being filled."""

    def __init__(self, used: int):
        self.groups: list[list[dict]] = [[]]
        self.used = used
        self.full = False  # the slide holds a rich output or a slide's worth of text: the next one starts anew

    def start(self) -> None:
        self.groups.append([])
        self.used = 0

    def add(self, output: dict) -> None:
        self.groups[-1].append(output)
        self.used += output_chars(output)

    def shares(self) -> bool:
        """Whether a rich output or a listing may join the slide being filled: no rich output on it yet, and half a
        slide's text left at least (else it starts a slide of its own)."""
        return (not self.full and not any(is_rich(o) for o in self.groups[-1])
                and MAX_SLIDE_CHARS - self.used >= MAX_SLIDE_CHARS // 2)


def output_slides(outputs: list[dict], chapter_url: str = "", shared: int = 0) -> list[list[dict]]:
    """Outputs grouped into slides: plain text stays with what precedes it while the slide has room; each rich
    output (each part of a long table) starts a slide of its own, and so does each part of printed text longer
    than a slide. ``chapter_url``: where a table too long for the slides is read instead; ``shared``: characters
    of text already on the first slide (the listing the outputs follow)."""
    slides = _Slides(shared)
    for output in outputs:
        text = "".join(output.get("text", "")) if output.get("output_type") == "stream" else ""
        listing = code_parts(text, measure=text_chars) if text else []
        if len(listing) > 1:
            for n, part in enumerate(listing):
                piece = copy.deepcopy(output)
                piece["text"] = part + "\n"
                if n or slides.full or slides.used + output_chars(piece) > MAX_SLIDE_CHARS:
                    slides.start()
                slides.add(piece)
            slides.full = True
            continue
        shares = slides.shares()
        room = MAX_SLIDE_CHARS - slides.used if shares else MAX_SLIDE_CHARS  # text the first part may show
        shown = shown_code_parts(output, room)
        if shown is not None:  # code shown by function object: its listings, each on a slide of its own
            for n, piece in enumerate(shown):
                if n or not shares:
                    slides.start()
                slides.add(piece)
            slides.full = True
            continue
        if not is_rich(output):
            if slides.full or slides.used + output_chars(output) > MAX_SLIDE_CHARS:
                slides.start()
                slides.full = False
            slides.add(output)
            continue
        page = _html(output)
        for part in _parts(page, chapter_url, room) if page else [None]:
            piece = output
            if part is not None and part != page:
                piece = copy.deepcopy(output)
                piece["data"]["text/html"] = part
            if not shares:
                slides.start()
            shares = False  # every part after the first has a slide of its own
            slides.add(piece)
            slides.full = True
    first = slides.groups[:1] if shared else []  # the listing's slide, though no output may join it
    return first + [s for s in slides.groups[len(first):] if s] or [[]]


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


_SENTENCE_END = re.compile(r"(?<=[.!?:;])\s+(?=[A-Z(*_`$\[\d])")


def is_prose(block: str) -> bool:
    """A paragraph of running text (not a list, table, quote, heading, code or math block)."""
    first = block.lstrip()
    return not re.match(r"(?:[-*+]|\d+[.)])\s|[|>#<]|`{3}|~{3}|\$\$", first)


def split_prose(block: str, budget: int) -> tuple[str, str]:
    """A paragraph as (what a slide shows, what goes to the speaker notes): whole sentences up to ``budget``
    characters (the first sentence at least), never cut inside inline code, math or a link."""
    if len(block) <= budget or not is_prose(block):
        return block, ""
    cuts = [m.start() for m in _SENTENCE_END.finditer(block)
            if block[:m.start()].count("`") % 2 == 0 and block[:m.start()].replace("$$", "").count("$") % 2 == 0
            and block[:m.start()].count("[") == block[:m.start()].count("]")]
    fitting = [c for c in cuts if c <= budget]
    cut = fitting[-1] if fitting else (cuts[0] if cuts else len(block))
    return block[:cut].rstrip(), block[cut:].strip()


def fragment_cells(lines: list[str], budget: int) -> list[tuple[str, str]]:
    """A revealed answer: its opening (up to the slide's text budget) appears on the next key press; a
    table in it gets a slide of its own and the rest of a long answer goes to the notes, so nothing on
    the slide is shrunk to unreadable text."""
    shown, tables, notes, used = [], [], [], 0
    for block in markdown_blocks(lines):
        if block.lstrip().startswith("|"):
            tables.append(block)
        elif not shown or (used + len(block) <= budget and not notes):
            block, rest = split_prose(block, max(0, budget - used)) if shown else split_prose(block, budget)
            shown.append(block)
            used += len(block)
            notes += [rest] if rest else []
        else:
            notes.append(block)
    cells = [("fragment", "\n\n".join(shown))] + [("slide", part) for table in tables for part in split_markdown_table(table)]
    return cells + ([("notes", "\n\n".join(notes))] if notes else [])


_CAPTION = re.compile(r'<p class="lab-caption">(?P<text>.*?)</p>', re.S)


def move_explorer_captions(outputs: list[dict]) -> tuple[list[dict], list[str]]:
    """Explorers without their caption paragraph, and the captions (as text for the speaker notes): the
    slide gives the explorer all its room, the teacher still has what the caption says."""
    kept, captions = [], []
    for output in outputs:
        page = _html(output)
        if page is None or "data-explorer=" not in page or not _CAPTION.search(page):
            kept.append(output)
            continue
        captions += [html.unescape(m["text"]) for m in _CAPTION.finditer(page)]
        output = copy.deepcopy(output)
        output["data"]["text/html"] = _CAPTION.sub("", page)
        kept.append(output)
    return kept, captions


#: Lines of code on one slide: the deck sets code at 15 px with 1.25 line height (19 px a line) on a 700 px
#: slide, which holds about 30 under a one-line input; code is never wrapped (indentation is its syntax), so a
#: line is one line however long (a line wider than the slide scrolls sideways in its own box).
CODE_LINES_PER_SLIDE = 28

_TOP_LEVEL = re.compile(r"^(?:@|def |class |async def )")
_FENCED = re.compile(r"^(?P<fence>`{3,})(?P<lang>[\w+-]*)\n(?P<body>.*?)\n(?P=fence)\s*$", re.S | re.M)


def _cut_at(lines: list[str], start: int, target: int, most: int) -> int:
    """Where the part from ``start`` ends: as near ``target`` lines as it can and at most ``most`` lines on,
    before a top-level ``def``/``class`` (a function per slide), else after a blank line, else before the least
    indented line; none of those past halfway to the target: at ``most``."""
    lo, hi = start + max(1, target // 2), min(len(lines), start + most)
    near = sorted(range(lo, hi), key=lambda i: abs(i - (start + target)))
    indent = lambda i: len(lines[i]) - len(lines[i].lstrip()) if lines[i].strip() else 10**6  # noqa: E731
    for i in near:
        if _TOP_LEVEL.match(lines[i]) and not lines[i - 1].startswith("@"):
            return i
    for i in near:
        if not lines[i - 1].strip():
            return i
    return min(near, key=lambda i: (indent(i), abs(i - (start + target))), default=hi)


def _fitting_lines(lines: list[str], start: int, room: int, measure) -> int:
    """How many lines from ``start`` one slide holds: at most :data:`CODE_LINES_PER_SLIDE` and ``room`` characters
    of text as ``measure`` counts them, one line at least (a line is never cut)."""
    count = 1
    while (count < CODE_LINES_PER_SLIDE and start + count < len(lines)
           and measure("\n".join(lines[start:start + count + 1])) <= room):
        count += 1
    return count


def code_parts(source: str, room: int = MAX_SLIDE_CHARS, measure=code_chars) -> list[str]:
    """``source`` cut into listings of at most :data:`CODE_LINES_PER_SLIDE` lines and ``room`` characters of text
    (``measure``: how a slide counts them, highlighted code by default), each line whole and the parts about
    even: between functions where it can, else at a blank line or an outer line. A line longer than ``room`` is
    a part by itself."""
    lines = source.splitlines()
    parts, start = [], 0
    while start < len(lines):
        most = _fitting_lines(lines, start, room, measure)
        left = len(lines) - start
        if left <= most:
            end = len(lines)
        else:  # even parts: as many lines each as the parts still needed share
            needed = max(2, -(-left // CODE_LINES_PER_SLIDE), -(-measure("\n".join(lines[start:])) // room))
            end = _cut_at(lines, start, min(most, -(-left // needed)), most)
        parts.append("\n".join(lines[start:end]).strip("\n"))
        start = end
    return [p for p in parts if p.strip()] or [source]


def shown_code_parts(output: dict, room: int = MAX_SLIDE_CHARS) -> list[dict] | None:
    """An output that shows source code as fenced Markdown (:func:`lab.book.show.show`) as one output per
    slide-sized listing: each function shown on slides of its own, a long one cut between its blocks; the
    first listing in ``room`` characters (what the slide it joins has left). None for any other output."""
    data = output.get("data") or {}
    markdown = data.get("text/markdown")
    if markdown is None or any(k.startswith("image/") or k == "text/html" for k in data):
        return None
    markdown = "".join(markdown) if isinstance(markdown, list) else markdown
    fences = list(_FENCED.finditer(markdown))
    if not fences:
        return None
    pieces = []
    for n, fence in enumerate(fences):
        for part in code_parts(fence["body"], room if n == 0 else MAX_SLIDE_CHARS):
            piece = copy.deepcopy(output)
            piece["data"] = {"text/markdown": f"```{fence['lang']}\n{part}\n```\n", "text/plain": part}
            pieces.append(piece)
    return pieces


def is_glue_output(output: dict) -> bool:
    """A value a chapter glued (myst-nb's scrapbook output): filled into the text, never shown as output."""
    return "scrapbook" in (output.get("metadata") or {})


def code_cell_slides(out, cell, table_url: str = "") -> bool:
    """Append a code cell's slides to the notebook ``out``: its listing (cut to fit), then each figure,
    explorer or table part on a horizontal slide of its own (→ reaches it), an explorer's caption in the
    speaker notes. ``table_url``: where a table too long for a slide is read. True when the last part had a
    slide of its own (prose after it starts a new one)."""
    import nbformat

    tags = set(cell.get("metadata", {}).get("tags", []))
    new = copy.deepcopy(cell)
    new.outputs = [o for o in new.get("outputs", []) if not is_glue_output(o)]
    if tags & {"remove-output", "hide-output"}:
        new.outputs = []
    hide_input = bool(tags & {"remove-input", "hide-input"})
    if hide_input and not new.outputs:
        return False
    new.outputs, captions = move_explorer_captions(new.outputs)
    listing = [] if hide_input else code_parts(new.source)
    for part in listing[:-1]:  # a long listing: its first parts on slides of their own, no output
        head = copy.deepcopy(new)
        head.source, head.outputs = part, []
        head.metadata = {"tags": sorted(tags), "slideshow": {"slide_type": "slide"}}
        out.cells.append(head)
    if listing:
        new.source = listing[-1]
    own = False
    shared = code_chars(listing[-1]) if listing else 0  # the listing's last part shares a slide with the outputs
    for n, outputs in enumerate(output_slides(new.outputs, table_url, shared)):
        part = copy.deepcopy(new) if n else new
        part.outputs = outputs
        # the listing's last part follows its earlier parts onto a new slide
        # every group after the first was cut off to start a slide of its own
        own = bool(n) or needs_own_slide(part.source, outputs, show_source=not hide_input) or len(listing) > 1
        part.metadata = {"tags": sorted(tags), "slideshow": {"slide_type": "slide" if own else "-"}}
        if hide_input or n:
            part.metadata["transient"] = {"remove_source": True}
        out.cells.append(part)
    if captions:
        out.cells.append(nbformat.v4.new_markdown_cell("\n\n".join(captions), metadata={"slideshow": {"slide_type": "notes"}}))
    return own

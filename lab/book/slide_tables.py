"""Cutting an HTML table into slide-sized parts: fewer columns, fewer rows, or a summary and a link.

A projected slide neither scrolls nor may shrink its text below what the back of a room can read, so a
table that is too wide or too tall for one slide is cut before the browser sees it. The size of a
table is estimated from its text, in characters of the deck's table font (``slides_template`` sets
17 px on a 960 px slide): each column is as wide as its longest unbreakable word at least and its
longest cell at most, the browser shares the rest of the slide between them, and a row is as tall as
its cell with the most wrapped lines. Then:

- a table wider than a slide is cut into column groups, each repeating the first column (the row's
  name);
- a table taller than a slide, or with more text than a slide may show (:data:`MAX_SLIDE_CHARS`, counted as
  :mod:`lab.book.slide_text` counts it), is cut into row groups, each repeating the header;
- a table that would still take more than :data:`MAX_PARTS` slides (long prose in its cells) stays in
  the chapter: the slide shows a summary (its size, its columns and the names of its rows) and a link.

A Markdown (pipe) table in a chapter's prose is cut into row groups by its text alone
(:func:`split_markdown_table`).

Long names (``void cutlass::device_kernel<flash::...>``) get break opportunities
(:mod:`lab.book.long_names`) so that they wrap inside their cell instead of widening the table.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass

from lab.book.long_names import add_breaks, pieces
from lab.book.slide_text import MAX_SLIDE_CHARS, html_chars, markdown_chars

#: Characters of table text across a slide: 900 px of a 960 px slide at 17 px, about 9.4 px a character.
SLIDE_CHARS = 92
#: Height of table a slide holds (px of its 700), and what a row takes: 21 px a line of text, 8 px of padding.
SLIDE_PX, LINE_PX, ROW_PAD_PX = 640, 21, 8
#: A table that needs more slides than this is summarised on the slide and read in the chapter.
MAX_PARTS = 4
#: Room a cell takes beyond its text (padding and the border), in characters.
CELL_PAD = 2

_TABLE = re.compile(r"(?P<head>.*?)(?P<table><table\b.*?</table>)(?P<tail>.*)", re.S | re.I)
_ROW = re.compile(r"<tr\b[^>]*>.*?</tr>", re.S | re.I)
_CELL = re.compile(r"<(?P<tag>t[hd])\b(?P<attrs>[^>]*)>(?P<body>.*?)</(?P=tag)>", re.S | re.I)
_SECTION = re.compile(r"<(?P<name>thead|tbody)\b[^>]*>(?P<rows>.*?)</(?P=name)>", re.S | re.I)
_TAG = re.compile(r"<[^>]+>")


def cell_text(body: str) -> str:
    """A cell's text as shown (tags dropped, entities decoded, spaces collapsed)."""
    return " ".join(html.unescape(_TAG.sub(" ", body)).split())


@dataclass
class Table:
    """An HTML table as rows of cells (each cell's HTML kept as is), with what surrounds it on the page."""

    before: str        # e.g. pandas Styler's <style> block
    open_tag: str      # <table ...>
    head: list[list[str]]
    body: list[list[str]]
    after: str

    @classmethod
    def parse(cls, page: str) -> Table | None:
        """The one table in ``page``, or None (no table, several, merged cells, or ragged rows)."""
        if page.lower().count("<table") != 1 or re.search(r"\b(?:col|row)span\s*=", page, re.I):
            return None
        m = _TABLE.match(page)
        if m is None:
            return None
        table = m["table"]
        sections = {s["name"].lower(): s["rows"] for s in _SECTION.finditer(table)}
        head_rows = _ROW.findall(sections.get("thead", ""))
        body_rows = _ROW.findall(sections["tbody"] if "tbody" in sections else _SECTION.sub("", table))
        cells = lambda rows: [[c.group(0) for c in _CELL.finditer(r)] for r in rows]  # noqa: E731
        head, body = cells(head_rows), cells(body_rows)
        widths = {len(r) for r in head + body}
        if len(widths) != 1 or not body:
            return None
        return cls(m["head"], re.match(r"<table\b[^>]*>", table, re.I).group(0), head, body, m["tail"])

    @property
    def columns(self) -> int:
        return len(self.body[0])

    @staticmethod
    def _tr(cells: list[str], columns: list[int]) -> str:
        return "<tr>" + "".join(add_breaks(cells[i]) for i in columns) + "</tr>"

    def html(self, columns: list[int], rows: list[int]) -> str:
        """These columns of these body rows (the header repeated), as a page like the one parsed."""
        head = f"<thead>{''.join(self._tr(r, columns) for r in self.head)}</thead>" if self.head else ""
        body = "".join(self._tr(self.body[i], columns) for i in rows)
        return f"{self.before}{self.open_tag}{head}<tbody>{body}</tbody></table>{self.after}"

    def row_chars(self, columns: list[int]) -> list[int]:
        """Characters of text each row shows in these columns (header rows first), as a slide counts them: a
        long name's break points (<wbr>) part its text too."""
        return [html_chars(self._tr(row, columns)) for row in self.head + self.body]


def _texts(table: Table) -> list[list[str]]:
    return [[cell_text(_CELL.match(c)["body"]) for c in row] for row in table.head + table.body]


def column_widths(texts: list[list[str]], columns: list[int], room: int = SLIDE_CHARS) -> dict[int, float]:
    """The width (characters) the browser would give each column: its longest word at least, its longest
    cell at most, the room left shared in proportion to what each column still wants."""
    least = {c: max(max((len(w) for w in pieces(row[c])), default=1) for row in texts) + CELL_PAD for c in columns}
    most = {c: max(len(row[c]) for row in texts) + CELL_PAD for c in columns}
    spare = room - sum(least.values())
    want = sum(most[c] - least[c] for c in columns)
    if spare <= 0 or want <= 0:
        return least if spare <= 0 else most
    share = min(1.0, spare / want)
    return {c: least[c] + share * (most[c] - least[c]) for c in columns}


def lines_in(text: str, width: float) -> int:
    """Lines ``text`` wraps to in a column ``width`` characters wide (greedy, at its break points)."""
    width = max(1.0, width - CELL_PAD)
    lines, used = 1, 0
    for word in pieces(text):
        if used and used + 1 + len(word) > width:
            lines += 1
            used = 0
        used += len(word) + (1 if used else 0)
        lines += max(0, math.ceil(len(word) / width) - 1)  # a word wider than the column is broken anywhere
    return lines


def column_groups(texts: list[list[str]], count: int, room: int = SLIDE_CHARS) -> list[list[int]]:
    """Columns in groups that each fit across a slide; the first column (the row's name) opens every group
    unless it is too wide to repeat (over a third of the slide)."""
    if count < 2 or sum(column_widths(texts, list(range(count)), room).values()) <= room:
        return [list(range(count))]
    lead = [0] if column_widths(texts, [0], room)[0] <= room / 3 else []
    groups, current = [], []
    for c in range(len(lead), count):
        if current and sum(column_widths(texts, lead + current + [c], room).values()) > room:
            groups.append(current)
            current = []
        current.append(c)
    return [lead + g for g in groups + [current]]


def row_groups(texts: list[list[str]], heads: int, columns: list[int], room: int = SLIDE_PX,
               chars: list[int] | None = None, text_room: int = MAX_SLIDE_CHARS) -> list[list[int]]:
    """Body rows in groups that fit down a slide, the header repeated on each: ``room`` px of rows and
    ``text_room`` characters of text (``chars``: each row's, header rows first; by default its cells' text)."""
    widths = column_widths(texts, columns)
    height = [max(lines_in(row[c], widths[c]) for c in columns) * LINE_PX + ROW_PAD_PX for row in texts]
    chars = chars or [len(" ".join(row[c] for c in columns)) for row in texts]
    head_px, head_chars = sum(height[:heads]), sum(n + 1 for n in chars[:heads])
    groups, current, used, text = [], [], head_px, head_chars
    for i, (px, n) in enumerate(zip(height[heads:], chars[heads:], strict=True)):
        if current and (used + px > room or text + n > text_room):
            groups.append(current)
            current, used, text = [], head_px, head_chars
        current.append(i)
        used += px
        text += n + 1
    return groups + [current] if current else groups


def split_table(page: str, text_room: int = MAX_SLIDE_CHARS) -> list[str] | None:
    """``page`` (HTML holding one table) as slide-sized parts of at most ``text_room`` characters of text, or None
    when it takes more than :data:`MAX_PARTS` slides (summarise it: :func:`summary_html`). A page that is no
    plain table is one part."""
    table = Table.parse(page)
    if table is None:
        return [page]
    texts = _texts(table)
    around = html_chars(table.before + table.after)  # a caption or note shown with every part
    parts = []
    for columns in column_groups(texts, table.columns):
        for rows in row_groups(texts, len(table.head), columns, chars=table.row_chars(columns),
                               text_room=text_room - around):
            parts.append(table.html(columns, rows))
    return parts if len(parts) <= MAX_PARTS else None


def split_markdown_table(block: str, room: int = MAX_SLIDE_CHARS) -> list[str]:
    """A Markdown (pipe) table as parts of at most ``room`` characters of text, its header repeated on each."""
    lines = block.splitlines()
    head, rows = lines[:2], lines[2:]  # the header row and its |---| rule, then the body
    if not rows:
        return [block]
    count = lambda line: markdown_chars(line.replace("|", " ")) + 1  # noqa: E731
    parts, current, used = [], [], count(head[0])
    for row in rows:
        if current and used + count(row) > room:
            parts.append(current)
            current, used = [], count(head[0])
        current.append(row)
        used += count(row)
    return ["\n".join(head + part) for part in [*parts, current]]


def summary_html(page: str, chapter_url: str) -> str:
    """A slide's stand-in for a table too long to project: what it holds, and a link to it in the chapter."""
    table = Table.parse(page)
    if table is None:
        raise ValueError("summary_html needs a page holding one plain table")
    texts = _texts(table)
    names = [row[0] for row in texts[len(table.head):]]
    columns = texts[0] if table.head else []
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    parts = [f'<div class="lab-table-summary"><p><b>A table of {len(names)} rows'
             + (f" and {table.columns} columns" if table.columns > 1 else "") + "</b>, too long for a slide.</p>"]
    if columns:
        parts.append(f"<p>Columns: {html.escape(', '.join(columns))}.</p>")
    parts.append(f"<p>Rows: {html.escape(shown)}.</p>")
    parts.append(f'<p><a href="{html.escape(chapter_url)}">Read the whole table in the chapter</a>.</p></div>')
    return "".join(parts)

"""Places where a long name may wrap: ``void cutlass::device_kernel<flash::...>`` in a narrow table cell.

A browser breaks a line only at spaces, so a kernel or file name of 60 characters makes its column 60
characters wide (a table wider than a phone, or than a slide). :func:`add_breaks` puts a <wbr> after
each ``::``, ``<``, ``,``, ``/``, ``_``, ``.`` and ``=`` inside words longer than :data:`LONG_WORD` characters
(``h200.load.agreement.requests``, ``BACKEND="FLASH"`` in a kernel's options); the
text reads and copies the same. Used on the site's table cells (lab.book.sphinxext) and on slides
(lab.book.slide_tables, which also needs :func:`pieces` to estimate how wide a column must be).
"""

from __future__ import annotations

import html
import re

#: A word longer than this gets break opportunities.
LONG_WORD = 16

_AFTER = re.compile(r"(::|&lt;|,|/|_|\.|=)(?=\S)")
_PIECE = re.compile(r"(?<=::)|(?<=<)|(?<=,)|(?<=/)|(?<=_)|(?<=\.)|(?<==)")
_CELL = re.compile(r"(<t[hd]\b[^>]*>)(.*?)(</t[hd]>)", re.S | re.I)


def add_breaks(fragment: str) -> str:
    """``fragment`` (HTML) with a <wbr> after each break point of its long words (text only; tags untouched)."""
    def word(m: re.Match) -> str:
        token = m.group(0)
        return _AFTER.sub(r"\1<wbr>", token) if len(html.unescape(token)) > LONG_WORD else token

    parts = re.split(r"(<[^>]+>)", fragment)
    return "".join(p if p.startswith("<") else re.sub(r"[^\s<>]+", word, p) for p in parts)


def add_breaks_in_cells(page: str) -> str:
    """``page`` with :func:`add_breaks` applied inside every table cell (<td>, <th>) and nowhere else; a cell
    holding a formula is left as it is (MathJax reads its TeX from one unbroken run of text)."""
    def cell(m: re.Match) -> str:
        body = m.group(2)
        if "\\(" in body or "\\[" in body or 'class="math' in body:
            return m.group(0)
        return m.group(1) + add_breaks(body) + m.group(3)

    return _CELL.sub(cell, page)


def pieces(text: str) -> list[str]:
    """The pieces of plain ``text`` a line may break between: its words, long ones cut at their break points."""
    out = []
    for word in text.split():
        out += _PIECE.split(word) if len(word) > LONG_WORD else [word]
    return [p for p in out if p]

"""How much text a slide may show, counted the way a reader of the deck's HTML counts it.

One idea a slide: a slide without a figure shows at most :data:`MAX_SLIDE_CHARS` characters of text, the rest
continues on further slides or goes to the speaker notes. The count is of the slide's HTML as a text extractor
reads it, every text node outside the speaker notes, scripts, styles and templates, read both ways a rule checker
may read them: joined by a space with runs of whitespace collapsed to one (BeautifulSoup's ``get_text(" ")``), and
as they stand, the markup's line breaks and indentation included (its ``get_text()``, a DOM's ``textContent``);
the larger counts. A syntax-highlighted listing is a text node per token, so it counts more than its source:
:func:`code_chars` counts code with every word and every mark apart, or as it stands where that is longer, never
less than what its highlighted HTML reads.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

#: Characters of text on a slide with no figure (a teacher's rule: one idea a slide).
MAX_SLIDE_CHARS = 900

_CODE_TOKEN = re.compile(r"\w+|[^\w\s]")
_LINK_TARGET = re.compile(r"\]\([^)]*\)")
_TAG = re.compile(r"<[^>]+>")
#: What a slide has in its DOM but does not show: speaker notes, scripts, styles, templates.
NOT_SHOWN = ("aside", "script", "style", "template")


def text_chars(text: str) -> int:
    """Characters of plain text (printed output in a ``<pre>``): whitespace collapsed, or as it stands if longer."""
    return max(len(" ".join(text.split())), len(text.strip("\n")))


def code_chars(code: str) -> int:
    """Characters of a listing as its highlighted HTML reads: each word and each mark set apart by a space, or the
    source as it stands (indentation and line breaks) if longer."""
    return max(len(" ".join(_CODE_TOKEN.findall(code))), len(code.strip("\n")))


def markdown_chars(markdown: str) -> int:
    """Characters of Markdown as rendered, about: link targets and tags dropped, the rest counted (emphasis
    marks, table pipes and heading hashes included, so never less than what the slide shows)."""
    return text_chars(_TAG.sub(" ", _LINK_TARGET.sub("]", markdown)))


class _Text(HTMLParser):
    """Text nodes as BeautifulSoup keeps them: one of whitespace alone outside a ``<pre>`` becomes one newline (or
    one space, if it had no line break); any other is kept as it stands."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.hidden = self.pre = 0

    def handle_starttag(self, tag, attrs):
        self.hidden += tag in NOT_SHOWN
        self.pre += tag in ("pre", "textarea")

    def handle_endtag(self, tag):
        if tag in NOT_SHOWN and self.hidden:
            self.hidden -= 1
        if tag in ("pre", "textarea") and self.pre:
            self.pre -= 1

    def handle_data(self, data):
        if not self.hidden:
            self.parts.append(data if data.strip() or self.pre else "\n" if "\n" in data else " ")


def html_text(page: str) -> str:
    """The text ``page`` shows: its text nodes outside :data:`NOT_SHOWN`, joined by a space, whitespace collapsed."""
    return " ".join(" ".join(_text_nodes(page)).split())


def _text_nodes(page: str) -> list[str]:
    parser = _Text()
    parser.feed(page)
    parser.close()
    return parser.parts


def html_chars(page: str) -> int:
    """Characters of text ``page`` shows: :func:`html_text`'s, or its text nodes as they stand (the markup's
    whitespace included), whichever is more."""
    return max(len(html_text(page)), len("".join(_text_nodes(page)).strip()))


def output_chars(output: dict) -> int:
    """Characters of text a notebook output shows on a slide: printed text, a table's or panel's HTML, a listing;
    a figure none (a slide with a figure is the figure's)."""
    if output.get("output_type") == "stream":
        return text_chars("".join(output.get("text", "")))
    data = output.get("data") or {}
    if any(mime.startswith("image/") for mime in data):
        return 0
    for mime, count in (("text/html", html_chars), ("text/markdown", code_chars), ("text/plain", text_chars)):
        if mime in data:
            value = data[mime]
            return count("".join(value) if isinstance(value, list) else value)
    return 0


def cell_chars(cell) -> int:
    """Characters of text a slide notebook's cell shows: a Markdown cell's, or a code cell's listing (unless the
    slide hides it) and outputs."""
    if cell.get("cell_type") == "markdown":
        return markdown_chars(cell.get("source", ""))
    hidden = cell.get("metadata", {}).get("transient", {}).get("remove_source")
    listing = 0 if hidden else code_chars(cell.get("source", ""))
    return listing + sum(output_chars(o) for o in cell.get("outputs", []))

"""An HTML output that is neither a table nor a quiz (a run panel, a note) cut between its blocks to fit slides.

The output's outermost element frames every part (its class gives each part the output's look); its child
elements are shared out in order, as many on a part as fit the room (:data:`lab.book.slide_text.MAX_SLIDE_CHARS`
on a slide of its own), a block that ends in a colon ("or run from a shell:") with the block it introduces. A block
is never cut: one longer than the room is a part by itself. An output of any
other shape (text outside its blocks, several outermost elements) stays whole.
"""

from __future__ import annotations

from html.parser import HTMLParser

from lab.book.slide_text import MAX_SLIDE_CHARS, NOT_SHOWN, html_chars, html_text

#: Elements with no closing tag.
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class _Blocks(HTMLParser):
    """Offsets of the outermost element's open and close tags and of each of its children."""

    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.starts = [0]  # where each line begins (getpos counts lines by "\n" alone)
        for line in page.split("\n"):
            self.starts.append(self.starts[-1] + len(line) + 1)
        self.depth, self.frame, self.blocks, self.loose = 0, [], [], False

    def _at(self) -> int:
        line, column = self.getpos()
        return self.starts[line - 1] + column

    def handle_starttag(self, tag, attrs):
        here = self._at()
        if self.depth == 0 and tag not in NOT_SHOWN:
            self.loose |= bool(self.frame)  # a second outermost element
            self.frame = [here, here + len(self.get_starttag_text())]
        elif self.depth == 1:
            self.blocks.append([here, here + len(self.get_starttag_text())])
        if tag not in VOID and (self.depth or tag not in NOT_SHOWN):
            self.depth += 1

    def handle_endtag(self, tag):
        if tag in VOID or not self.depth:
            return
        self.depth -= 1
        end = self.rawdata.index(">", self._at()) + 1
        if self.depth == 1 and self.blocks:
            self.blocks[-1][1] = end
        elif self.depth == 0 and self.frame:
            self.frame.append(self._at())
            self.frame.append(end)

    def handle_data(self, data):
        self.loose |= self.depth == 1 and bool(data.strip())


def split_blocks(page: str, room: int = MAX_SLIDE_CHARS) -> list[str]:
    """``page`` as parts of at most ``room`` characters of text, each in the outermost element's frame."""
    if html_chars(page) <= room:
        return [page]
    parser = _Blocks(page)
    parser.feed(page)
    parser.close()
    if parser.loose or len(parser.frame) != 4 or len(parser.blocks) < 2:
        return [page]
    open_at, opened, close_at, closed = parser.frame
    before, open_tag, close_tag, after = page[:open_at], page[open_at:opened], page[close_at:closed], page[closed:]
    units: list[list[str]] = []  # a block that ends in a colon introduces the next: the two stay on one slide
    for start, end in parser.blocks:
        block = page[start:end]
        leads = units and html_text(units[-1][-1]).endswith(":") and html_chars("".join(units[-1]) + block) < room
        if leads:
            units[-1].append(block)
        else:
            units.append([block])
    parts, current, used = [], [], 0
    for unit in units:
        chars = html_chars(" ".join(unit))
        if current and used + 1 + chars > room:
            parts.append(current)
            current, used = [], 0
        current += unit
        used += chars + (1 if used else 0)
    parts.append(current)
    return [before + open_tag + "\n".join(blocks) + close_tag + after for blocks in parts]

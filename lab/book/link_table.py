"""A table whose cells may hold links, shown by their titles (a raw URL makes a column as wide as the URL).

    LinkTable(["GPU", "sources"], [["NVIDIA H200", [("H200 datasheet", "https://www.nvidia.com/...")]]])

A cell is text (an address in it becomes a link named by its site), or a list of ``(title, url)`` pairs
shown as links one per line. The table is the
same ``<table>`` a DataFrame would give (thead, tbody), so the site's and the slide decks' table rules
apply to it; each cell names its column (``data-label``), so that on a phone the site can show a row as
one block of named cells (book/_static/site.css).
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass

from lab import LabError

Cell = str | Sequence[tuple[str, str]]


_URL = re.compile(r"https?://(?:www\.)?(?P<host>[^/\s)]+)[^\s)]*")


def _cell(value: Cell) -> str:
    if isinstance(value, str):  # an address in the text is a link named by its site
        return _URL.sub(lambda m: f'<a href="{m.group(0)}">{m["host"]}</a>', html.escape(value))
    return "<br>".join(f'<a href="{html.escape(url)}">{html.escape(title)}</a>' for title, url in value)


@dataclass
class LinkTable:
    columns: Sequence[str]
    rows: Sequence[Sequence[Cell]]

    def __post_init__(self):
        ragged = [i for i, row in enumerate(self.rows) if len(row) != len(self.columns)]
        if ragged:
            raise LabError(f"LinkTable: row {ragged[0]} has {len(self.rows[ragged[0]])} cells for "
                           f"{len(self.columns)} columns")

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(f'<td data-label="{html.escape(c)}">{_cell(v)}</td>'
                                        for c, v in zip(self.columns, row, strict=True)) + "</tr>" for row in self.rows)
        return f'<table class="lab-link-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'

    def __repr__(self) -> str:
        lines = [" | ".join(self.columns)]
        for row in self.rows:
            lines.append(" | ".join(v if isinstance(v, str) else "; ".join(f"{t} <{u}>" for t, u in v) for v in row))
        return "\n".join(lines)

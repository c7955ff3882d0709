"""What the chapters call on their page modules with no arguments (``ch04.race_table()``, ``ch05.decode_figure()``),
read from the code cells of ``book/*.md``: the figure and table tests walk the same list."""

import re

from lab import REPO_ROOT

#: ``ch04.race_table()`` in a chapter's code cells: a page module and a function called with no arguments.
CALL = re.compile(r"\b(intro|appendix|ch\d\d[a-z]?)\.(\w+)\(\)")
PAGE_CALLS = sorted({m.groups() for page in (REPO_ROOT / "book").glob("*.md")
                     for m in CALL.finditer(page.read_text(encoding="utf-8"))})

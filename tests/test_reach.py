"""A chapter imports only what it uses: the lines of lab a chapter's cells reach through imports (module-level
and inside functions, as ``tests/test_layers.py`` reads them) stay at or under :data:`MAX_SHARE` of lab's lines.

``python -m pytest tests/test_reach.py -s`` prints each chapter's reach.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from test_layers import MODULES, graph, resolve

from lab import REPO_ROOT

MAX_SHARE = 0.40
CHAPTERS = sorted((REPO_ROOT / "book").glob("*.md"))
_CELL = re.compile(r"```\{code-cell\}[^\n]*\n(.*?)```", re.DOTALL)


def lines_of(module: str) -> int:
    return len(MODULES[module].read_text(encoding="utf-8").splitlines())


def cell_imports(markdown: str) -> set[str]:
    """The lab modules a chapter's code cells import (cell options and IPython magics skipped)."""
    found = set()
    for cell in _CELL.findall(markdown):
        if cell.startswith("---"):  # the cell's YAML options, between two --- lines
            cell = cell.split("\n---\n", 1)[-1]
        code = "\n".join(line for line in cell.splitlines() if not line.startswith((":", "%", "!")))
        tree = ast.parse(code)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.split(".")[0] == "lab"}
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "lab":
                found |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else node.module
                          for a in node.names}
    return {m for m in (resolve(name) for name in found) if m}


def reach(modules: set[str], edges: dict[str, set[str]]) -> set[str]:
    """Every module reached from ``modules``, packages' ``__init__`` included."""
    seen, todo = set(), list(modules)
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        parts = module.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) in MODULES]
        todo += edges.get(module, ())
    return seen


@pytest.fixture(scope="module")
def edges():
    return graph()


def test_reach_follows_imports_inside_functions_too():
    toy = {"a": {"b"}, "b": {"c"}, "c": set(), "d": {"a"}}
    assert reach({"a"}, toy) == {"a", "b", "c"}


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_a_chapter_reaches_at_most_two_fifths_of_lab(chapter: Path, edges):
    total = sum(lines_of(m) for m in MODULES)
    reached = reach(cell_imports(chapter.read_text(encoding="utf-8")), edges)
    lines = sum(lines_of(m) for m in reached)
    print(f"{chapter.stem}: {len(reached)} modules, {lines:,} of {total:,} lines ({lines / total:.0%})")
    assert lines <= MAX_SHARE * total, (
        f"{chapter.name} reaches {lines:,} of lab's {total:,} lines ({lines / total:.0%}) through "
        f"{len(reached)} modules; the largest: "
        + ", ".join(f"{m} ({lines_of(m)})" for m in sorted(reached, key=lines_of, reverse=True)[:8]))

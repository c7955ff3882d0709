"""The one-way rule of lab's layers, read from the source with ``ast`` (imports inside functions too).

    core     lab, lab.cli, lab.env, lab.names,       imports core only
             lab.store, lab.units, ...
    measure  lab.measure.*                            core, measure
    results  lab.results.*                            core, measure, results
    book     lab.book.*                               anything below, and book
    app      lab.__main__                             anything (the command table)

Chapters (book/*.md) import from lab.book and lab.results, plus the code they teach line by line
(lab.measure.attention kernels, lab.measure.census rules); measuring from a chapter goes through
lab.book. No import cycle between modules, and no ``from lab.x import _private`` across modules.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from lab import REPO_ROOT

LAB = REPO_ROOT / "lab"
RANK = {"core": 0, "measure": 1, "results": 2, "book": 3, "app": 4}
CHAPTER_ALLOWED = ("lab.book", "lab.results", "lab.measure.attention", "lab.measure.census", "lab.env")


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> str:
    if module == "lab.__main__":
        return "app"
    for name in ("measure", "results", "book"):
        if module == f"lab.{name}" or module.startswith(f"lab.{name}."):
            return name
    return "core"


MODULES = {module_name(p): p for p in LAB.rglob("*.py")}


def resolve(name: str) -> str | None:
    """The lab module an imported name lives in (``lab.results.data.load`` -> ``lab.results.data``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(path: Path) -> list[tuple[str, str, int]]:
    """(imported module, imported name or '', line) for every lab import in a file's source."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(a.name, "", node.lineno) for a in node.names if a.name.split(".")[0] == "lab"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "lab" and not node.level:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                found.append((full if full in MODULES else node.module, "" if full in MODULES else a.name, node.lineno))
    return found


def graph() -> dict[str, set[str]]:
    edges = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        for target, _, _ in imports_of(path):
            target = resolve(target)
            if target and target != module and not module.startswith(target + "."):  # a package's own __init__
                edges[module].add(target)
    return edges


def test_no_import_runs_up_the_layers():
    upward = []
    for module, targets in graph().items():
        for target in targets:
            if target == "lab":
                continue
            if RANK[layer(target)] > RANK[layer(module)]:
                upward.append(f"{module} ({layer(module)}) imports {target} ({layer(target)})")
    assert not upward, "\n".join(sorted(upward))


def find_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in edges:
        if v not in index:
            visit(v)
    return out


def test_there_are_no_import_cycles():
    assert find_cycles(graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_another_modules_private_names():
    private = []
    for module, path in MODULES.items():
        for target, name, line in imports_of(path):
            if name.startswith("_") and resolve(target) != module:
                private.append(f"{path.relative_to(REPO_ROOT)}:{line} imports {name} from {target}")
    assert not private, "\n".join(private)


CHAPTER_IMPORT = re.compile(r"^\s*(?:from\s+(lab(?:\.[\w.]+)?)\s+import\s+([\w, ]+)|import\s+(lab[\w.]*))", re.M)


def test_chapters_import_from_the_book_and_results_layers():
    wrong = []
    for chapter in sorted((REPO_ROOT / "book").glob("*.md")):
        for m in CHAPTER_IMPORT.finditer(chapter.read_text(encoding="utf-8")):
            module = m.group(1) or m.group(3)
            names = [n.strip() for n in (m.group(2) or "").split(",") if n.strip()]
            targets = [f"{module}.{n}" if f"{module}.{n}" in MODULES else module for n in names] or [module]
            for target in targets:
                if not target.startswith(CHAPTER_ALLOWED):
                    wrong.append(f"{chapter.name}: {m.group(0).strip()}")
    assert not wrong, "\n".join(wrong)

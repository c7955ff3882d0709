"""The book's fact registry: every value a page glued, what it means and where it came from, so one quantity
quoted two ways on two pages (or a page that contradicts the data's run of record) fails a test.

**Writing.** During a book build :mod:`lab.book.sphinxext` sets ``LAB_FACTS_DIR`` (a folder beside the
HTML: ``_build/facts``) and, before each page executes, ``LAB_BOOK_PAGE`` (its name, ``book/06-vllm-sweeps``).
:func:`lab.book.facts.glue_all` then calls :func:`record`, and ``<LAB_FACTS_DIR>/<page>.json`` holds every
value the page glued so far (rewritten whole after each call, atomically). Outside a build nothing is written.

**Checking** (tests/test_consistency.py): :func:`read` loads every page's entries;
:func:`contradictions` finds a quantity (a :class:`lab.results.facts.Fact` with a ``quantity`` key) glued
with two values or from two sources; :func:`name_clashes` one glue name with two values on two pages;
:func:`unnamed_runs` a number quoted from a run other than the run of
record (:mod:`lab.results.records`) on a page that does not name that run, and a page that calls a folder
"the run of record" when the data declares another; :func:`object_reprs` a Python object's repr printed
into a page (``<... Styler at 0x7f...>``).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lab import LabError, store
from lab.results import records
from lab.results.facts import UNITS, Fact, plain

FOLDER_ENV, PAGE_ENV = "LAB_FACTS_DIR", "LAB_BOOK_PAGE"
#: Relative difference below which two values of one quantity are the same number (float round-off).
SAME_WITHIN = 1e-9


@dataclass(frozen=True)
class Entry:
    """One glued value: the page and glue name, the value (raw, before any format) and what the page showed."""

    page: str
    name: str
    value: Any
    shown: Any
    quantity: str | None = None
    unit: str = ""
    source: str | None = None
    method: str = ""


def _json_value(value: Any) -> Any:
    value = plain(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    return f"<{type(value).__name__}>"  # a table or figure: its kind, not its repr (which carries an address)


def entry(page: str, name: str, fact: Any, shown: Any) -> Entry:
    """The registry entry of one glued fact (or bare value)."""
    if not isinstance(fact, Fact):
        return Entry(page, name, _json_value(fact), _json_value(shown))
    value = _json_value(fact.value) if fact.measured else None
    return Entry(page, name, value, _json_value(shown), fact.quantity, fact.unit, fact.source, fact.method)


_PAGE_ENTRIES: dict[str, Entry] = {}  # this process's page (one kernel executes one page)


def record(facts: Mapping[str, Any], shown: Mapping[str, Any]) -> Path | None:
    """Add what one ``glue_all`` call glued to this page's registry file; nothing outside a book build."""
    folder, page = os.environ.get(FOLDER_ENV), os.environ.get(PAGE_ENV)
    if not folder or not page:
        return None
    for name, fact in facts.items():
        _PAGE_ENTRIES[name] = entry(page, name, fact, shown[name])
    body = {"page": page, "facts": [asdict(e) for e in _PAGE_ENTRIES.values()]}
    return store.write_json_atomic(Path(folder) / f"{page}.json", body)


def read(folder: Path) -> list[Entry]:
    """Every entry of every page's registry file under ``folder``."""
    files = sorted(Path(folder).rglob("*.json"))
    if not files:
        raise LabError(f"{folder}: no fact registry; build the book with lab.book.sphinxext (scripts/build_site.sh)")
    out = []
    for path in files:
        body = store.read_json(path)
        try:
            out.extend(Entry(**item) for item in body["facts"])
        except (KeyError, TypeError) as exc:
            raise LabError(f"{path}: not a fact registry file ({exc})") from None
    return out


# --- checks ------------------------------------------------------------------------------------------

def _where(e: Entry) -> str:
    return f"{e.page} ({e.name})"


def _base(e: Entry) -> tuple:
    """A value comparable across units: (dimension, number in its base unit), or (unit, value) as given."""
    if isinstance(e.value, (int, float)) and not isinstance(e.value, bool) and e.unit in UNITS:
        dimension, factor = UNITS[e.unit]
        return dimension, float(e.value) * factor
    return e.unit, e.value


def _same(a: tuple, b: tuple) -> bool:
    if a[0] != b[0]:
        return False
    x, y = a[1], b[1]
    if isinstance(x, float) and isinstance(y, float):
        return math.isclose(x, y, rel_tol=SAME_WITHIN, abs_tol=0.0) or (math.isnan(x) and math.isnan(y))
    return x == y


def contradictions(entries: list[Entry]) -> list[str]:
    """Every quantity glued from two sources, or with two values (after converting units), one line each."""
    by_quantity = defaultdict(list)
    for e in entries:
        if e.quantity:
            by_quantity[e.quantity].append(e)
    problems = []
    for quantity, glued in sorted(by_quantity.items()):
        first = glued[0]
        for other in glued[1:]:
            if other.source != first.source:
                problems.append(f"{quantity}: {_where(first)} glues it from {first.source!r}, "
                                f"{_where(other)} from {other.source!r}")
            elif not _same(_base(first), _base(other)):
                problems.append(f"{quantity}: {_where(first)} glues {first.value!r} {first.unit}, "
                                f"{_where(other)} glues {other.value!r} {other.unit}")
    return problems


def name_clashes(entries: list[Entry]) -> list[str]:
    """One glue name on two pages with two values: one name must mean one thing across the book (glue the one
    fact on both pages, or give the second meaning a name of its own)."""
    by_name = defaultdict(list)
    for e in entries:
        by_name[e.name].append(e)
    problems = []
    for name, glued in sorted(by_name.items()):
        first = glued[0]
        for other in glued[1:]:
            if other.page != first.page and not _same(_base(first), _base(other)):
                problems.append(f"{name}: {first.page} glues {first.value!r} {first.unit} (from {first.source!r}), "
                                f"{other.page} glues {other.value!r} {other.unit} (from {other.source!r})")
    return problems


_GLUE_REFERENCE = re.compile(r"\{glue(?::\w+)?\}\s*`?(\w+)")


def used_in_prose(entries: list[Entry], markdown: Mapping[str, str]) -> list[Entry]:
    """The entries a page's markdown shows (``{glue:text}`name```, a ``{glue}`` block) and every quiz's citations;
    a page may glue more than it shows (the interview's whole fact table), and what it does not show quotes nothing."""
    shown = {page: set(_GLUE_REFERENCE.findall(text)) for page, text in markdown.items()}
    return [e for e in entries if e.name.startswith("quiz ") or e.name in shown.get(e.page, set())]


_DATA_PATH = re.compile(r"data/[\w.*/-]+")
_RUN_OF_RECORD = re.compile(r"[^.]*\bruns? of record\b[^.]*\.?", re.IGNORECASE)


def _named(folder: str, text: str, names: tuple[str, ...] = ()) -> bool:
    """Whether a page's text names a run: its folder (``data/h200/kernels-contiguous`` or its last part), or
    one of the names its record declares ("in single blocks")."""
    folder = folder.removeprefix("data/").split("*")[0].rstrip("/")
    return folder in text or folder.rsplit("/", 1)[-1] in text or any(name in text for name in names)


def unnamed_runs(entries: list[Entry], texts: Mapping[str, str]) -> list[str]:
    """Numbers quoted from a run other than the run of record on a page that does not name that run; and a
    sentence that calls a folder the run of record when the data (lab.results.records) declares another."""
    problems = []
    for e in entries:
        for path in _DATA_PATH.findall(e.source or ""):
            found = records.record_of(path)
            if found and found[1] == "other":
                folder = next(f for f in found[0].others if path.removeprefix("data/").startswith(f))
                if not _named(folder, texts.get(e.page, ""), found[0].names):
                    problems.append(f"{_where(e)} quotes {found[0].measurement} from {folder}, not its run of record "
                                    f"({', '.join(found[0].record)}), and the page does not name that run")
    for page, text in texts.items():
        for sentence in _RUN_OF_RECORD.findall(text):
            for path in _DATA_PATH.findall(sentence):
                found = records.record_of(path)
                if found and found[1] == "other":
                    problems.append(f"{page}: calls {path} a run of record; the data declares "
                                    f"{', '.join(found[0].record)} ({found[0].measurement})")
    return problems


_OBJECT_REPR = re.compile(r"[\w.]+(?: object)? at 0x[0-9a-fA-F]{4,}")


def object_reprs(texts: Mapping[str, str]) -> list[str]:
    """A Python object's repr printed into a page or slide (``<pandas.io.formats.style.Styler at 0x7f...>``)."""
    return [f"{page}: prints {found.group(0)!r}" for page, text in texts.items()
            for found in [_OBJECT_REPR.search(text)] if found]

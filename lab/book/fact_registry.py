"""The book's fact registry: every value a page glued, what it means and where it came from, so one quantity
stated two ways (on one page or on two) is refused while the book builds, and fails a test on the built site.

**Writing.** During a book build :mod:`lab.book.sphinxext` sets ``LAB_FACTS_DIR`` (a folder beside the
HTML: ``_build/facts``) and, before each page executes, ``LAB_BOOK_PAGE`` (its name, ``book/06-vllm-sweeps``).
:func:`lab.book.facts.glue_all` then calls :func:`record`, which **refuses** (a LabError, so the page's
cell fails and with it the build) a named quantity (:mod:`lab.results.quantities`) or a glue name that this
page or a page built before it states with another value or from another source; otherwise
``<LAB_FACTS_DIR>/<page>.json`` holds every value the page glued so far (rewritten whole, atomically).
Outside a build nothing is written or checked.

**Checking** (tests/test_consistency.py): :func:`read` loads every page's entries; :func:`contradictions`
finds a quantity stated with two values (after rounding to what each page shows) or from two sources;
:func:`name_clashes` one glue name with two values on two pages; :func:`unnamed_runs` a number quoted from
a run other than its quantity's run of record on a page that does not name that run;
:func:`unnamed_numbers` a number from data/ glued without a quantity name; :func:`object_reprs` a Python
object's repr printed into a page (``<... Styler at 0x7f...>``).
"""

from __future__ import annotations

import math
import os
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lab import LabError, store
from lab.results import records
from lab.results.facts import UNITS, Fact, plain
from lab.results.quantities import other_run

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
    run: str = ""


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
    return Entry(page, name, value, _json_value(shown), fact.quantity, fact.unit, fact.source, fact.method, fact.run)


_PAGE_ENTRIES: dict[str, Entry] = {}  # this process's page (one kernel executes one page)


def record(facts: Mapping[str, Any], shown: Mapping[str, Any]) -> Path | None:
    """Add what one ``glue_all`` call glued to this page's registry file; nothing outside a book build.

    Refuses (LabError, nothing written) a quantity or glue name that this page, or a page already built,
    states with another value or from another source."""
    folder, page = os.environ.get(FOLDER_ENV), os.environ.get(PAGE_ENV)
    if not folder or not page:
        return None
    new = {name: entry(page, name, fact, shown[name]) for name, fact in facts.items()}
    earlier = [e for e in _PAGE_ENTRIES.values() if e.name not in new] + _other_pages(Path(folder), page)
    problems = clashes_with(list(new.values()), earlier)
    if problems:
        raise LabError("refused to glue one quantity two ways: " + "; ".join(problems))
    _PAGE_ENTRIES.update(new)
    body = {"page": page, "facts": [asdict(e) for e in _PAGE_ENTRIES.values()]}
    return store.write_json_atomic(Path(folder) / f"{page}.json", body)


def _other_pages(folder: Path, page: str) -> list[Entry]:
    """What the pages built before this one glued (their registry files in this build's folder)."""
    own = (folder / f"{page}.json").resolve()
    files = [p for p in sorted(folder.rglob("*.json")) if p.resolve() != own] if folder.is_dir() else []
    return [e for path in files for e in _entries(path)]


def _entries(path: Path) -> list[Entry]:
    body = store.read_json(path)
    try:
        return [Entry(**item) for item in body["facts"]]
    except (KeyError, TypeError) as exc:
        raise LabError(f"{path}: not a fact registry file ({exc})") from None


def read(folder: Path) -> list[Entry]:
    """Every entry of every page's registry file under ``folder``."""
    files = sorted(Path(folder).rglob("*.json"))
    if not files:
        raise LabError(f"{folder}: no fact registry; build the book with lab.book.sphinxext (scripts/build_site.sh)")
    return [e for path in files for e in _entries(path)]


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
    if isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool) and not isinstance(y, bool):
        return math.isclose(x, y, rel_tol=SAME_WITHIN, abs_tol=0.0) or (math.isnan(x) and math.isnan(y))
    return x == y


_SHOWN_NUMBER = re.compile(r"[-+−]?\d[\d,]*(?:\.(\d+))?")


def shown_number(shown: Any) -> tuple[float, int] | None:
    """The number a page showed and its decimals (``"0.84×"`` -> (0.84, 2)); None for a text without one."""
    if isinstance(shown, bool) or shown is None:
        return None
    if isinstance(shown, (int, float)):
        return (float(shown), 12) if math.isfinite(shown) else None
    found = _SHOWN_NUMBER.search(str(shown))
    if not found:
        return None
    return float(found.group(0).replace(",", "").replace("−", "-")), len(found.group(1) or "")


def _shown_differ(a: Entry, b: Entry) -> bool:
    """Two entries of one quantity in one unit whose shown numbers differ at the coarser of their precisions."""
    if a.unit != b.unit:
        return False
    x, y = shown_number(a.shown), shown_number(b.shown)
    if x is None or y is None:
        return False
    places = min(x[1], y[1])
    return round(x[0], places) != round(y[0], places)


def _quantity_clash(first: Entry, other: Entry) -> str | None:
    if other.source != first.source:
        return (f"{first.quantity}: {_where(first)} states it from {first.source!r}, "
                f"{_where(other)} from {other.source!r}")
    if not _same(_base(first), _base(other)) or _shown_differ(first, other):
        return (f"{first.quantity}: {_where(first)} states {first.shown!r} ({first.value!r} {first.unit}), "
                f"{_where(other)} states {other.shown!r} ({other.value!r} {other.unit})")
    return None


def _name_clash(first: Entry, other: Entry) -> str | None:
    if other.page != first.page and not _same(_base(first), _base(other)):
        return (f"{first.name}: {first.page} glues {first.value!r} {first.unit} (from {first.source!r}), "
                f"{other.page} glues {other.value!r} {other.unit} (from {other.source!r})")
    return None


def clashes_with(new: Iterable[Entry], earlier: Iterable[Entry]) -> list[str]:
    """Each new entry that states a quantity, or uses a glue name, differently from an earlier entry."""
    by_quantity, by_name = defaultdict(list), defaultdict(list)
    for e in earlier:
        if e.quantity:
            by_quantity[e.quantity].append(e)
        by_name[e.name].append(e)
    problems = []
    for e in new:
        found = [p for p in (_quantity_clash(old, e) for old in by_quantity.get(e.quantity, []) if e.quantity) if p]
        found += [p for p in (_name_clash(old, e) for old in by_name.get(e.name, [])) if p]
        problems += found[:1]
    return problems


def contradictions(entries: list[Entry]) -> list[str]:
    """Every quantity stated from two sources, or with two values (after converting units, and at the
    precision each page shows), one line each."""
    by_quantity = defaultdict(list)
    for e in entries:
        if e.quantity:
            by_quantity[e.quantity].append(e)
    problems = []
    for _, glued in sorted(by_quantity.items()):
        problems += [p for p in (_quantity_clash(glued[0], other) for other in glued[1:]) if p]
    return problems


def name_clashes(entries: list[Entry]) -> list[str]:
    """One glue name on two pages with two values: one name must mean one thing across the book (glue the one
    fact on both pages, or give the second meaning a name of its own)."""
    by_name = defaultdict(list)
    for e in entries:
        by_name[e.name].append(e)
    problems = []
    for _, glued in sorted(by_name.items()):
        problems += [p for p in (_name_clash(glued[0], other) for other in glued[1:]) if p]
    return problems


_GLUE_REFERENCE = re.compile(r"\{glue(?::\w+)?\}\s*`?(\w+)")


def used_in_prose(entries: list[Entry], markdown: Mapping[str, str]) -> list[Entry]:
    """The entries a page's markdown shows (``{glue:text}`name```, a ``{glue}`` block) and every quiz's citations;
    a page may glue more than it shows (a table's cells), and what it does not show states nothing."""
    shown = {page: set(_GLUE_REFERENCE.findall(text)) for page, text in markdown.items()}
    return [e for e in entries if e.name.startswith("quiz ") or e.name in shown.get(e.page, set())]


def _names_run(folder: str, text: str) -> bool:
    """Whether a page's text names a run: its folder (``data/h200/kernels-contiguous`` or its last part), or
    one of the words :mod:`lab.results.records` gives it ("in single blocks")."""
    found = records.run_holding(folder)
    names = found.names if found else ()
    folder = folder.removeprefix("data/").split("*")[0].rstrip("/")
    return folder in text or folder.rsplit("/", 1)[-1] in text or any(name in text for name in names)


def unnamed_runs(entries: list[Entry], texts: Mapping[str, str]) -> list[str]:
    """Numbers quoted from a run other than their quantity's run of record (``quantity@run``) on a page that
    does not name that run."""
    problems = []
    for e in entries:
        run = other_run(e.quantity or "")
        if run and not _names_run(run, texts.get(e.page, "")):
            problems.append(f"{_where(e)} states {e.quantity.split('@')[0]} from {run}, not its run of record, "
                            f"and the page does not name that run")
    return problems


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def unnamed_numbers(entries: list[Entry]) -> list[str]:
    """Numbers from a file under data/ glued without a quantity name: every number the book states from a
    measurement has a name, one definition and one run of record (lab.results.quantities)."""
    return [f"{_where(e)}: {e.value!r} from {e.source!r} has no quantity name"
            for e in entries if _is_number(e.value) and not e.quantity and (e.source or "").startswith("data/")]


_OBJECT_REPR = re.compile(r"[\w.]+(?: object)? at 0x[0-9a-fA-F]{4,}")


def object_reprs(texts: Mapping[str, str]) -> list[str]:
    """A Python object's repr printed into a page or slide (``<pandas.io.formats.style.Styler at 0x7f...>``)."""
    return [f"{page}: prints {found.group(0)!r}" for page, text in texts.items()
            for found in [_OBJECT_REPR.search(text)] if found]

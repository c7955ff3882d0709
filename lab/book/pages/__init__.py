"""One page module per chapter: it opens each run the chapter needs once and returns every fact it states.

    ch01 ... ch07, interview, course_kit, appendix, intro   (``ch05b``, ``ch06b``, ``ch06c`` for the lettered chapters)

A chapter glues its facts in one hidden cell,

    from lab.book.facts import glue_all
    from lab.book.pages import ch04

    glue_all(ch04.facts())

and draws its figures, tables and explorers with calls of the same module (``ch04.prefill_figure()``). The
sentences stay in the chapter's markdown; choosing rows of a table, fact keys and formatting live here.
The code a chapter *teaches* (a kernel, the online softmax) is not here: the chapter shows it by function
object (:func:`lab.book.show.show`), from the module that runs it.

**Quantities.** Each number a page states is a :class:`lab.results.quantities.Quantity` (a name, one
definition, one run of record), declared once at module level in the page module of the chapter that
teaches it (or in the ``lab.results`` module that computes it). A later chapter, the interview page and
the course kit state that number by taking the teaching page's fact, under the same glue name; they never
read the same data a second time. :func:`declared` collects every declared quantity, for the appendix's
table of runs and for the tests.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator

from lab.results.quantities import Quantity
from lab import LabError

#: The packages whose modules may declare quantities at module level.
DECLARING = ("lab.results", "lab.book.pages")


def _modules(package: str) -> Iterator[object]:
    root = importlib.import_module(package)
    yield root
    for info in pkgutil.walk_packages(root.__path__, f"{package}."):
        yield importlib.import_module(info.name)


def _quantities_in(values) -> Iterator[Quantity]:
    """The quantities among a module's values, and inside its module-level dicts, tuples and lists."""
    for value in values:
        if isinstance(value, Quantity):
            yield value
        elif isinstance(value, dict):
            yield from (v for v in value.values() if isinstance(v, Quantity))
        elif isinstance(value, (tuple, list)):
            yield from (v for v in value if isinstance(v, Quantity))


def declared() -> dict[str, tuple[Quantity, str]]:
    """Every quantity declared at module level in :data:`DECLARING`: name -> (quantity, declaring module).
    A LabError if two modules declare one name."""
    found: dict[str, tuple[Quantity, str]] = {}
    for package in DECLARING:
        for module in _modules(package):
            for value in _quantities_in(vars(module).values()):
                where = module.__name__
                if value.name in found and found[value.name][0] is not value:
                    raise LabError(f"quantity {value.name} is declared twice: in {found[value.name][1]} and in {where}")
                found.setdefault(value.name, (value, where))
    return found

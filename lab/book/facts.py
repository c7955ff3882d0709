"""Typed facts for the prose: a value that knows where it came from, glued into the markdown.

``lab.results`` returns values (numbers, flags such as "same launches", or "not measured yet");
the sentence around them lives in the chapter's markdown, written once, where the writer sees it.
A chapter collects its facts in a dict and calls :func:`glue_all` once:

    glue_all({"h200_ridge": Fact(ridge, "lab.results.hardware: datasheet"), ...})

and the markdown says ``{glue:text}`h200_ridge:.0f``` FLOP per byte. During a book build every glued
value is also written to the page's fact registry (:mod:`lab.book.fact_registry`), which the
consistency test reads.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from lab.book import fact_registry
from lab.results.facts import NOT_MEASURED, Fact, plain  # noqa: F401  (Fact and NOT_MEASURED: part of this module's face)


def shown(value: Any, fmt: str, source: str, suffix: str = "") -> Fact:
    """A fact that may be missing (None or NaN), glued as ``value`` formatted by ``fmt`` with ``suffix`` after it
    when measured, as "not measured yet" when not."""
    missing = value is None or (isinstance(value, float) and math.isnan(value))
    return Fact(None if missing else value, source, "{:" + fmt + "}" + suffix.replace("{", "{{").replace("}", "}}"))


class Glued(dict):
    """The values :func:`glue_all` glued. As a cell's last expression it shows nothing: the values
    belong in the prose, not dumped under the cell (nor inside a numbered figure with the plot)."""

    def _ipython_display_(self) -> None:
        pass


def glued_value(fact: Any) -> Any:
    """What the page shows for ``fact``: a bare value as it is; a :class:`Fact` in its ``fmt`` when it has
    one, or as the words ``not measured yet`` when it is not measured."""
    if not isinstance(fact, Fact):
        return plain(fact)
    if not fact.measured:
        return NOT_MEASURED
    return fact.text().value if fact.fmt else plain(fact.value)


def glue_all(facts: Mapping[str, Any], *, display: bool = False) -> Glued:
    """Glue every fact under its name; returns the plain values glued (name -> value)."""
    from myst_nb import glue

    glued = Glued()
    for name, fact in facts.items():
        value = glued_value(fact)
        glue(name, value, display=display)
        glued[name] = value
    fact_registry.record(facts, glued)
    return glued

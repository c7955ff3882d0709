"""Typed facts for the prose: a value that knows where it came from, glued into the markdown.

``lab.results`` returns values (numbers, flags such as "same launches", or "not measured yet");
the sentence around them lives in the chapter's markdown, written once, where the writer sees it.
A chapter collects its facts in a dict and calls :func:`glue_all` once:

    glue_all({"h200_ridge": Fact(ridge, "lab.results.hardware: datasheet"), ...})

and the markdown says ``{glue:text}`h200_ridge:.0f``` FLOP per byte.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lab import LabError

NOT_MEASURED = "not measured yet"


@dataclass(frozen=True)
class Fact:
    """One value for the prose and its source (a data file under data/, or the lab function that computed it).

    ``value`` None means the measurement is not on file: :attr:`measured` is False and the glued text says
    so instead of printing a number that does not exist.
    """

    value: Any
    source: str

    def __post_init__(self):
        if not isinstance(self.source, str) or not self.source.strip():
            raise LabError(f"a fact needs a source (the data file or lab function it comes from), got {self.source!r}")

    @property
    def measured(self) -> bool:
        value = self.value
        return value is not None and not (isinstance(value, float) and math.isnan(value))


def plain(value: Any) -> Any:
    """numpy and pandas scalars as plain Python numbers (glue's format specs need them)."""
    return value.item() if hasattr(value, "item") else value


def glue_all(facts: Mapping[str, Any], *, display: bool = False) -> dict[str, Any]:
    """Glue every fact under its name; returns the plain values glued (name -> value).

    A bare value is taken as it is; a :class:`Fact` that is not measured is glued as the words
    ``not measured yet`` so the page never shows a made-up number.
    """
    from myst_nb import glue

    glued = {}
    for name, fact in facts.items():
        if isinstance(fact, Fact):
            value = plain(fact.value) if fact.measured else NOT_MEASURED
        else:
            value = plain(fact)
        glue(name, value, display=display)
        glued[name] = value
    return glued

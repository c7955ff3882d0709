"""A value for the prose that knows where it came from (:class:`Fact`), and the "not measured yet" state.

``lab.results`` returns Facts; ``lab.book.facts.glue_all`` glues them into a chapter. A Fact whose
value is None (or NaN) is not measured: the page says so instead of printing a number that does not
exist.
"""

from __future__ import annotations

import math
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

"""A value for the prose that knows where it came from (:class:`Fact`), and the "not measured yet" state.

``lab.results`` returns Facts; ``lab.book.facts.glue_all`` glues them into a chapter. A Fact whose
value is None (or NaN) is not measured: the page says so instead of printing a number that does not
exist.

A Fact that stands for a quantity the book quotes in more than one place carries a ``quantity`` key
("bandwidth_ceiling[h200]", "h200.fa3.kv_read_rate") and its ``unit``: the book's consistency test
(tests/test_consistency.py) fails when one quantity is glued with two values or from two sources.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lab import LabError

NOT_MEASURED = "not measured yet"

#: unit -> (dimension, factor to the dimension's base unit): what :meth:`Fact.to` converts between.
UNITS = {
    "B/s": ("B/s", 1.0), "GB/s": ("B/s", 1e9), "TB/s": ("B/s", 1e12),
    "FLOP/s": ("FLOP/s", 1.0), "TFLOP/s": ("FLOP/s", 1e12),
    "s": ("s", 1.0), "ms": ("s", 1e-3), "us": ("s", 1e-6),
    "B": ("B", 1.0), "kB": ("B", 1e3), "KiB": ("B", 1024.0), "MB": ("B", 1e6), "GB": ("B", 1e9),
    "fraction": ("1", 1.0), "%": ("1", 1e-2),
}


@dataclass(frozen=True)
class Fact:
    """One value for the prose and its source (a data file under data/, or the lab function that computed it).

    ``value`` None means the measurement is not on file: :attr:`measured` is False and the glued text says
    so instead of printing a number that does not exist. ``fmt``, when set, is how the value is glued: a
    format spec, ".1f"; a template that carries the unit, "{:.1f}×"; or a function that writes the value,
    :func:`lab.units.power_of_ten` for a tiny error (4.8 × 10⁻⁷, as the tables write it, not 4.8e-07). A
    format spec in the markdown would fail on the words "not measured yet", so the format travels with the fact. ``quantity`` names what the
    number means wherever it appears, ``unit`` is the unit of ``value`` (a key of :data:`UNITS` where it has
    one), ``method`` says how it was obtained, ``run`` the run it was read from (a folder under data/; set by
    :meth:`lab.results.quantities.Quantity.fact`).
    """

    value: Any
    source: str
    fmt: str | Callable[[Any], str] = ""
    quantity: str | None = None
    unit: str = ""
    method: str = ""
    run: str = ""

    def __post_init__(self):
        if not isinstance(self.source, str) or not self.source.strip():
            raise LabError(f"a fact needs a source (the data file or lab function it comes from), got {self.source!r}")

    @property
    def measured(self) -> bool:
        value = self.value
        return value is not None and not (isinstance(value, float) and math.isnan(value))

    def text(self) -> Fact:
        """This fact with its value formatted by ``fmt`` (not measured stays not measured)."""
        if not self.measured:
            return dataclasses.replace(self, value=None, fmt="")
        value = plain(self.value)
        if callable(self.fmt):
            shown = self.fmt(value)
        else:
            shown = self.fmt.format(value) if "{" in self.fmt else format(value, self.fmt)
        return dataclasses.replace(self, value=shown, fmt="")

    def shown_as(self, fmt: str | Callable[[Any], str]) -> Fact:
        """This fact glued in ``fmt`` (a format spec, or a template that carries the unit)."""
        return dataclasses.replace(self, fmt=fmt)

    def to(self, unit: str) -> Fact:
        """The same quantity in another unit of its dimension: ``ceiling.to("TB/s")``."""
        have, want = UNITS.get(self.unit), UNITS.get(unit)
        if have is None or want is None or have[0] != want[0]:
            raise LabError(f"cannot convert {self.quantity or 'a fact'} from {self.unit or 'no unit'!r} to {unit!r}")
        value = None if not self.measured else plain(self.value) * have[1] / want[1]
        return dataclasses.replace(self, value=value, unit=unit)


def plain(value: Any) -> Any:
    """numpy and pandas scalars as plain Python numbers (glue's format specs need them)."""
    return value.item() if hasattr(value, "item") else value

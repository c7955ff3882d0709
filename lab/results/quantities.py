"""Named quantities: every number the book states has a name, one definition and one run of record.

A :class:`Quantity` is declared once, in the page module of the chapter that teaches it
(``lab/book/pages/``), and every page that states the number takes the :class:`lab.results.facts.Fact`
it makes. ``quantity.fact(value, *params)`` fills in the source from the run of record, so a page
cannot attach the number to another run by accident:

    SPEED_VS_FA3 = Quantity("h200.prefill.speed_vs_fa3", "FA3's time over the kernel's, causal prefill, "
                            "one process, interleaved rounds", run="h200/kernels-race", file="prefill.csv", unit="×")
    SPEED_VS_FA3.fact(0.84, "ours-tuned", "16k")   # quantity "h200.prefill.speed_vs_fa3[ours-tuned, 16k]"

A number of the same quantity from another run is allowed only where the quantity declares that run in
``others``, with why it differs (``fact(..., run="h200/kernels-ablation")``). It is then its own quantity,
``name[params]@run``, and the page that states it must name that run (``tests/test_consistency.py``).

``run`` is a folder under ``data/`` for a measurement, or, for a number nobody measured here, where it comes
from (``datasheet: lab.results.hardware``, ``lab.results.iomodel``): a source that is not a folder is its own
record. The glue layer (:mod:`lab.book.fact_registry`) refuses one quantity glued from two sources or
with two values, across every page of a build.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lab import LabError
from lab.results.facts import Fact


def is_data_run(run: str) -> bool:
    """Whether a run names a folder under data/ (a measurement), not a datasheet or a lab function."""
    return bool(run) and ":" not in run and not run.startswith("lab.") and " " not in run


@dataclass(frozen=True)
class Quantity:
    """A number the book states: its name, its one definition, its unit and its run of record.

    ``params`` given to :meth:`fact` pick one member of a family (a kernel and a length, a batch size):
    each member is a quantity of its own, ``name[p1, p2]``.
    """

    name: str
    means: str
    run: str                    # run of record: folder under data/, or a non-measured origin (see module doc)
    file: str = ""              # the file of the run the value is read from ("prefill.csv")
    unit: str = ""
    fmt: str = ""               # how it is glued by default (a format spec or a template with the unit)
    others: Mapping[str, str] = field(default_factory=dict)  # other runs of it kept on file -> why they differ

    def __post_init__(self):
        if not self.name or any(c in self.name for c in "[]@"):
            raise LabError(f"a quantity's name is a dotted key without brackets or '@', got {self.name!r}")
        if not self.means.strip() or not self.run.strip():
            raise LabError(f"quantity {self.name}: needs what it means and its run of record")
        for other in self.others:
            if other == self.run:
                raise LabError(f"quantity {self.name}: its run of record {other} is listed among its other runs")

    @property
    def source(self) -> str:
        """The run of record as a fact's source: ``data/<folder>/<file>``, or the non-measured origin."""
        return self.source_in(self.run)

    def source_in(self, run: str) -> str:
        if not is_data_run(run):
            return run
        return f"data/{run}/{self.file}" if self.file else f"data/{run}"

    def member(self, *params: Any) -> str:
        """The name of one member of the family: ``name[p1, p2]`` (just ``name`` without params)."""
        return f"{self.name}[{', '.join(map(str, params))}]" if params else self.name

    def fact(self, value: Any, *params: Any, fmt: str | None = None, run: str | None = None,
             detail: str = "") -> Fact:
        """``value`` as this quantity (one member of it, with ``params``), its source filled in from its run.

        ``run``: another run that the quantity declares in ``others``; the fact is then the quantity
        ``name[params]@run``. ``detail`` adds to the source what the file alone does not say (a column, a
        second file of the same run)."""
        run = run or self.run
        name = self.member(*params)
        if run != self.run:
            if run not in self.others:
                raise LabError(f"quantity {name}: its run of record is {self.run}; {run} is not one of its "
                               f"declared other runs ({', '.join(self.others) or 'none'}): add it with why it differs")
            name = f"{name}@{run}"
        source = self.source_in(run) + (f" ({detail})" if detail else "")
        return Fact(value, source, self.fmt if fmt is None else fmt, quantity=name, unit=self.unit,
                    method=self.means, run=run)


def base_name(quantity: str) -> str:
    """The declared name of a quantity key: ``h200.x[a, b]@h200/run`` -> ``h200.x``."""
    return quantity.split("@", 1)[0].split("[", 1)[0]


def other_run(quantity: str) -> str | None:
    """The run a quantity key was quoted from when that is not its run of record (``...@run``), else None."""
    return quantity.split("@", 1)[1] if "@" in quantity else None

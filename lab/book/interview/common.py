"""What the interview's fact readers share: facts that may be missing, glued in their own format, and one
row of a table. Arm names, the H200 sweep table, the decode floor and the KV read rate live in
:mod:`lab.results` (:mod:`lab.results.sweeps`, :mod:`lab.results.concurrency`), where every chapter reads them."""

from __future__ import annotations

from lab.book.facts import Fact
from lab.results import reference
from lab.results.sweeps import FA2, FA3, FLASH, FLEX  # noqa: F401  (the arms the interview's readers name)

A10G = reference.DATASET
GB = 1e9


def missing_facts(formats: dict, source: str) -> dict:
    """Every name of ``formats`` (name -> format) as a fact that is not measured."""
    return {name: Fact(None, source, fmt) for name, fmt in formats.items()}


def shown_facts(values: dict, formats: dict, source: str) -> dict:
    """A fact glued in its format per name of ``formats``; a name missing from ``values`` is not measured."""
    return {name: Fact(values.get(name), source, fmt) for name, fmt in formats.items()}


def row(table, **where):
    """The one row of ``table`` matching ``where`` (ValueError otherwise)."""
    rows = table
    for key, value in where.items():
        rows = rows[rows[key] == value]
    if len(rows) != 1:
        raise ValueError(f"{len(rows)} rows match {where}")
    return rows.iloc[0]

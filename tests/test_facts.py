"""Typed facts: a value with its source; glue_all glues values, and "not measured yet" for a missing one."""

import math

import numpy as np
import pytest

from lab import LabError
from lab.book import facts as book_facts
from lab.results.facts import NOT_MEASURED, Fact


def test_a_fact_needs_a_source():
    with pytest.raises(LabError, match="source"):
        Fact(1.0, " ")


def test_none_and_nan_are_not_measured():
    assert Fact(3, "x").measured and Fact("706 TFLOP/s", "x").measured
    assert not Fact(None, "x").measured and not Fact(math.nan, "x").measured


def test_glue_all_glues_plain_values_and_the_missing_state(monkeypatch):
    glued = {}
    import myst_nb

    monkeypatch.setattr(myst_nb, "glue", lambda name, value, display=False: glued.__setitem__(name, value))
    out = book_facts.glue_all({"a": np.float64(2.5), "b": Fact(np.int64(7), "data/x.csv"), "c": Fact(None, "data/y.csv")})
    assert out == glued == {"a": 2.5, "b": 7, "c": NOT_MEASURED}
    assert type(glued["a"]) is float and type(glued["b"]) is int


def test_glue_all_shows_nothing_as_a_cells_last_expression(monkeypatch):
    import myst_nb

    monkeypatch.setattr(myst_nb, "glue", lambda *a, **k: None)
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    format_dict, _ = shell.display_formatter.format(book_facts.glue_all({"a": 1}))
    assert format_dict == {}, format_dict


def test_a_fact_written_by_a_function_is_glued_as_the_tables_write_it():
    from lab.units import power_of_ten

    assert book_facts.glued_value(Fact(4.768372e-07, "x", power_of_ten)) == "4.8 × 10⁻⁷"
    assert book_facts.glued_value(Fact(np.float64(0.0), "x", power_of_ten)) == "0"
    assert book_facts.glued_value(Fact(None, "x", power_of_ten)) == NOT_MEASURED

"""The book does not contradict itself: every glued quantity has one value and one source on every page, a
number quoted from a run other than the run of record names that run, and no page or slide prints a
Python object's repr.

The registry is written by the book build itself (lab.book.fact_registry, one JSON file per page beside the
HTML); these tests read it from the site the session builds once (tests/conftest.py's ``built_site``). The
checks are plain functions, and the planted contradictions below show each of them failing.
"""

import dataclasses
import html
import json
import re
from pathlib import Path

import pytest

from lab import REPO_ROOT, LabError
from lab.book import fact_registry
from lab.book.fact_registry import Entry
from lab.results.facts import Fact
from lab.results.quantities import Quantity, is_data_run

_SCRIPT_OR_STYLE = re.compile(r"<(script|style)\b.*?</\1>", re.DOTALL | re.IGNORECASE)
_TAG = re.compile(r"<[^>]+>")


def _text(page_html: str) -> str:
    """What a reader sees of a page: its HTML without scripts, styles and tags, whitespace folded."""
    visible = _TAG.sub(" ", _SCRIPT_OR_STYLE.sub(" ", page_html))
    return re.sub(r"\s+", " ", html.unescape(visible))


def _pages(site: Path, entries) -> dict[str, str]:
    """page name (as the registry names it, 'book/06-vllm-sweeps') -> its visible text."""
    return {page: _text((site / f"{page}.html").read_text(encoding="utf-8")) for page in {e.page for e in entries}}


@pytest.fixture(scope="module")
def registry(built_site: Path) -> list[Entry]:
    return fact_registry.read(built_site.parent / "facts")


# --- the built book ----------------------------------------------------------------------------------

def test_every_page_that_glues_has_a_registry(built_site: Path, registry):
    pages = {e.page for e in registry}
    assert {"book/01-roofline", "book/05-decode-split-kv", "book/06-vllm-sweeps", "book/08-interview-prep"} <= pages
    quantities = {e.quantity for e in registry if e.quantity}
    assert "bandwidth_ceiling[h200]" in quantities and "bandwidth_ceiling.datasheet[a10g]" in quantities


def test_no_quantity_is_glued_with_two_values_or_from_two_sources(registry):
    problems = fact_registry.contradictions(registry)
    assert not problems, "the book glues one quantity two ways:\n" + "\n".join(problems)


def test_one_glue_name_means_one_thing_on_every_page(registry):
    problems = fact_registry.name_clashes(registry)
    assert not problems, "one glue name, two values:\n" + "\n".join(problems)


def test_the_bandwidth_ceiling_is_glued_on_several_pages_from_one_source(registry):
    ceiling = [e for e in registry if e.quantity == "bandwidth_ceiling[h200]"]
    assert len({e.page for e in ceiling}) >= 3, "the ceiling should be quoted across the book, one fact everywhere"
    assert {e.source for e in ceiling} == {"data/h200/bandwidth/read_stream.csv"}


def test_a_number_from_another_run_names_that_run(built_site: Path, registry):
    markdown = {page: (REPO_ROOT / f"{page}.md").read_text(encoding="utf-8") for page in {e.page for e in registry}}
    shown = fact_registry.used_in_prose(registry, markdown)
    assert len(shown) > 200, "the pages show far more glued numbers than that; is the glue reference pattern stale?"
    problems = fact_registry.unnamed_runs(shown, _pages(built_site, registry))
    assert not problems, "\n".join(problems)


def test_no_page_or_slide_prints_an_object_repr(built_site: Path):
    texts = {str(path.relative_to(built_site)): path.read_text(encoding="utf-8") for path in built_site.rglob("*.html")}
    assert any(name.startswith("slides/") for name in texts), "no slide deck in the built site"
    problems = fact_registry.object_reprs(texts)
    assert not problems, "\n".join(problems)


# --- the checks fail on planted contradictions ---------------------------------------------------------

def _entry(page, name, fact):
    return fact_registry.entry(page, name, fact, fact.value)


CEILING = Fact(4.3e12, "data/h200/bandwidth/read_stream.csv", quantity="bandwidth_ceiling[h200]", unit="B/s")


def test_one_quantity_in_two_units_is_one_value():
    entries = [_entry("book/a", "x", CEILING), _entry("book/b", "y", CEILING.to("TB/s")),
               _entry("book/c", "z", CEILING.to("GB/s").shown_as(",.0f"))]
    assert fact_registry.contradictions(entries) == []


def test_a_planted_second_value_fails():
    other = Fact(4.8e12, CEILING.source, quantity=CEILING.quantity, unit="B/s")
    problems = fact_registry.contradictions([_entry("book/a", "x", CEILING), _entry("book/b", "y", other.to("TB/s"))])
    assert len(problems) == 1 and "bandwidth_ceiling[h200]" in problems[0] and "book/b (y)" in problems[0]


def test_a_planted_second_source_fails():
    copy = Fact(4.3e12, "data/h200/hardware/measurements.json", quantity=CEILING.quantity, unit="B/s")
    problems = fact_registry.contradictions([_entry("book/a", "x", CEILING), _entry("book/b", "y", copy)])
    assert len(problems) == 1 and "from 'data/h200/hardware/measurements.json'" in problems[0]


def test_a_quantity_measured_on_one_page_and_missing_on_another_fails():
    missing = Fact(None, CEILING.source, quantity=CEILING.quantity, unit="B/s")
    assert fact_registry.contradictions([_entry("book/a", "x", CEILING), _entry("book/b", "y", missing)])


def test_a_planted_contradiction_in_registry_files_fails(tmp_path):
    """The reader finds a clash written into two pages' registry files (a build the glue layer did not watch:
    files copied together from two builds, say)."""
    for page, value in (("book/one", 4.3e12), ("book/two", 4.4e12)):
        fact = Fact(value, CEILING.source, quantity=CEILING.quantity, unit="B/s")
        body = {"page": page, "facts": [dataclasses.asdict(fact_registry.entry(page, "ceiling", fact, value)),
                                        dataclasses.asdict(fact_registry.entry(page, "bare", 3, 3))]}
        path = tmp_path / f"{page}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(body))
    entries = fact_registry.read(tmp_path)
    assert {(e.page, e.name) for e in entries} == {("book/one", "ceiling"), ("book/one", "bare"),
                                                  ("book/two", "ceiling"), ("book/two", "bare")}
    assert len(fact_registry.contradictions(entries)) == 1


def test_a_name_glued_with_two_values_on_two_pages_fails():
    entries = [_entry("book/a", "short_len", Fact(257, "data/x/sweep.csv")),
               _entry("book/b", "short_len", Fact(256, "data/x/sweep.csv")),
               _entry("book/c", "ridge", Fact(206.1, "lab.results.hardware")),
               _entry("book/d", "ridge", Fact(206.1, "lab.results.hardware")),
               _entry("book/e", "ceiling", CEILING), _entry("book/f", "ceiling", CEILING.to("TB/s"))]
    problems = fact_registry.name_clashes(entries)
    assert len(problems) == 1 and problems[0].startswith("short_len: book/a glues 257")


def test_a_quiz_records_the_facts_its_numbers_come_from(tmp_path, monkeypatch):
    """Chapter 5's quiz computes two shares of the bandwidth ceiling: the ceiling it divides by is registered."""
    from lab.book.quizzes import ch05

    monkeypatch.setenv(fact_registry.FOLDER_ENV, str(tmp_path))
    monkeypatch.setenv(fact_registry.PAGE_ENV, "book/05-decode-split-kv")
    monkeypatch.setattr(fact_registry, "_PAGE_ENTRIES", {})
    ch05.quiz()
    cited = [e for e in fact_registry.read(tmp_path) if e.quantity == "bandwidth_ceiling[h200]"]
    assert cited and all(e.name.startswith("quiz ") and e.unit == "GB/s" for e in cited)


def test_nothing_is_written_outside_a_build(tmp_path, monkeypatch):
    monkeypatch.delenv(fact_registry.FOLDER_ENV, raising=False)
    assert fact_registry.record({"a": 1}, {"a": 1}) is None


def test_a_number_from_another_run_must_name_it():
    speed = Quantity("h200.test.speed", "a planted speed", run="h200/kernels-race", file="prefill.csv",
                     others={"h200/kernels-ablation": "timed minutes later in its own process"})
    record, other = speed.fact(0.84, "16k"), speed.fact(0.81, "16k", run="h200/kernels-ablation")
    assert other.quantity == "h200.test.speed[16k]@h200/kernels-ablation" and other.source.startswith("data/h200/kernels-ablation")
    entries = [_entry("book/a", "x", record), _entry("book/a", "y", other), _entry("book/b", "z", other)]
    texts = {"book/a": "in the ablation's own run (data/h200/kernels-ablation) FA3 was timed again",
             "book/b": "an earlier run"}
    problems = fact_registry.unnamed_runs(entries, texts)
    assert len(problems) == 1 and problems[0].startswith("book/b (z)")
    assert fact_registry.contradictions(entries) == []  # the other run is a quantity of its own


def test_another_run_must_be_declared_with_why_it_differs():
    speed = Quantity("h200.test.speed", "a planted speed", run="h200/kernels-race")
    with pytest.raises(LabError, match="not one of its declared other runs"):
        speed.fact(0.81, run="h200/kernels-ablation")


def test_only_what_a_page_shows_is_checked_for_its_runs():
    speed = Quantity("h200.test.speed", "a planted speed", run="h200/kernels",
                     others={"h200/kernels-contiguous": "block-timed, before interleaved rounds"})
    entries = [_entry("book/a", name, speed.fact(1.0, name, run="h200/kernels-contiguous")) for name in "xyz"]
    markdown = {"book/a": "took {glue:text}`x:.1f` ms, then\n```{glue} y\n```\n"}
    assert [e.name for e in fact_registry.used_in_prose(entries, markdown)] == ["x", "y"]
    assert fact_registry.unnamed_runs(entries[:1], {"book/a": "timed one candidate in single blocks"}) == []


def test_a_number_from_data_without_a_quantity_name_fails():
    named = Quantity("h200.test.ms", "a planted time", run="h200/kernels-race", file="prefill.csv", unit="ms")
    entries = [_entry("book/a", "x", Fact(3.1, "data/h200/kernels-race/prefill.csv")),
               _entry("book/a", "y", named.fact(3.1)), _entry("book/a", "z", Fact("FA3", "data/h200/kernels-race/prefill.csv")),
               _entry("book/a", "w", Fact(12, "lab.measure.attention: a constant of the code"))]
    problems = fact_registry.unnamed_numbers(entries)
    assert len(problems) == 1 and problems[0].startswith("book/a (x)")


def test_two_values_that_round_apart_fail_and_two_that_round_together_do_not():
    speed = Quantity("h200.test.speed", "a planted speed", run="h200/kernels-race", file="prefill.csv", unit="×")
    fact = speed.fact(0.8118)
    same = [_entry("book/a", "x", fact.shown_as(".2f")), _entry("book/b", "x", fact.shown_as(".1f"))]
    same = [fact_registry.entry(e.page, e.name, fact, shown) for e, shown in zip(same, ("0.81", "0.8"), strict=True)]
    assert fact_registry.contradictions(same) == []
    # a page that states the quantity with a hand-typed rounding of another value
    typed = fact_registry.entry("book/c", "x", fact, "0.84")
    problems = fact_registry.contradictions(same + [typed])
    assert len(problems) == 1 and "'0.84'" in problems[0]


def test_the_glue_layer_refuses_a_quantity_stated_two_ways(tmp_path, monkeypatch):
    """During a build the second page that states a quantity with another value fails at once, and its
    registry file is not written."""
    import myst_nb

    from lab.book import facts as book_facts

    monkeypatch.setattr(myst_nb, "glue", lambda *a, **k: None)
    monkeypatch.setenv(fact_registry.FOLDER_ENV, str(tmp_path))
    speed = Quantity("h200.test.speed", "a planted speed", run="h200/kernels-race", file="prefill.csv", unit="×")
    monkeypatch.setenv(fact_registry.PAGE_ENV, "book/one")
    monkeypatch.setattr(fact_registry, "_PAGE_ENTRIES", {})
    book_facts.glue_all({"tuned_vs_fa3": speed.fact(0.84, "ours-tuned", "16k")})
    monkeypatch.setenv(fact_registry.PAGE_ENV, "book/two")
    monkeypatch.setattr(fact_registry, "_PAGE_ENTRIES", {})
    book_facts.glue_all({"tuned_vs_fa3": speed.fact(0.84, "ours-tuned", "16k")})  # the same fact: fine
    with pytest.raises(LabError, match=r"h200.test.speed\[ours-tuned, 16k\]"):
        book_facts.glue_all({"tuned_vs_fa3_again": speed.fact(0.88, "ours-tuned", "16k")})
    with pytest.raises(LabError, match="tuned_vs_fa3"):  # one glue name, another value
        book_facts.glue_all({"tuned_vs_fa3": Fact(0.88, "data/h200/kernels-tuning-race/race.csv")})
    assert not (tmp_path / "book" / "two.json").read_text().count("0.88")
    # and on one page: the same quantity from two sources
    monkeypatch.setenv(fact_registry.PAGE_ENV, "book/three")
    monkeypatch.setattr(fact_registry, "_PAGE_ENTRIES", {})
    clone = Fact(0.84, "data/h200/kernels-tuning-race/race.csv", quantity=speed.member("ours-tuned", "16k"))
    with pytest.raises(LabError, match="from 'data/h200/kernels-tuning-race/race.csv'"):
        book_facts.glue_all({"copy": clone})


def test_a_planted_duplicate_in_the_built_registry_fails(registry):
    """The built site's own registry, with one quantity planted again at another value on another page."""
    named = next(e for e in registry if e.quantity and isinstance(e.value, float))
    planted = dataclasses.replace(named, page="book/planted", name="planted", value=named.value * 1.1,
                                  shown=f"{named.value * 1.1:.3g}")
    assert fact_registry.contradictions(registry) == []
    problems = fact_registry.contradictions(registry + [planted])
    assert len(problems) == 1 and "book/planted (planted)" in problems[0]


def test_every_number_the_book_states_from_data_has_a_name(built_site, registry):
    markdown = {page: (REPO_ROOT / f"{page}.md").read_text(encoding="utf-8") for page in {e.page for e in registry}}
    problems = fact_registry.unnamed_numbers(fact_registry.used_in_prose(registry, markdown))
    assert not problems, f"{len(problems)} numbers without a quantity name:\n" + "\n".join(problems[:40])


def test_every_quantity_is_declared_once_and_has_a_known_run():
    from lab.book.pages import declared
    from lab.results import records

    for quantity, _module in declared().values():
        for run in (quantity.run, *quantity.others):
            if is_data_run(run):
                records.run(run)  # raises for a run that is not in lab.results.records.RUNS


def test_an_object_repr_fails():
    texts = {"slides/04.slides.html": "<p>&lt;pandas.io.formats.style.Styler at 0x7f3a2c1d9e50&gt;</p>",
             "book/x.html": "<p><lab.results.facts.Fact object at 0x7fe1></p>", "book/y.html": "<p>0x1f is 31</p>"}
    problems = fact_registry.object_reprs(texts)
    assert [p.split(":")[0] for p in problems] == ["slides/04.slides.html", "book/x.html"]

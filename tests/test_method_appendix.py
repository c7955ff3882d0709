"""Chapters 04/05 teach the kernels; the method (bars, runs of record, rounds, drift, clocks) lives in one appendix."""

from __future__ import annotations

import re

import yaml

from lab import REPO_ROOT

BOOK = REPO_ROOT / "book"
KERNEL_CHAPTERS = ("04-flashattention-triton", "05-decode-split-kv")


def _code(chapter: str) -> str:
    """The code cells of a chapter, joined."""
    text = (BOOK / f"{chapter}.md").read_text(encoding="utf-8")
    return "\n".join(re.findall(r"```\{code-cell\}[^\n]*\n(.*?)\n```", text, flags=re.S))


def test_kernel_chapters_show_no_bar_tables_and_link_the_appendix():
    for chapter in KERNEL_CHAPTERS:
        code, text = _code(chapter), (BOOK / f"{chapter}.md").read_text(encoding="utf-8")
        for bookkeeping in ("bars.csv", "bars_over_runs", "runs_of_record", "stored_runs", "kernels-contiguous"):
            assert bookkeeping not in code, f"{chapter} reads {bookkeeping}: that belongs in appendix-method"
        assert "{doc}`appendix-method`" in text, f"{chapter} should send the reader to the method appendix"


def test_chapters_glue_once_per_cell_and_build_no_sentences_in_python():
    for chapter in (*KERNEL_CHAPTERS, "appendix-method"):
        text = (BOOK / f"{chapter}.md").read_text(encoding="utf-8")
        cells = re.findall(r"```\{code-cell\}[^\n]*\n(.*?)\n```", text, flags=re.S)
        assert all(cell.count("glue_all(") <= 1 for cell in cells), f"{chapter}: one glue_all call per cell"
        assert not re.search(r"\bglue\(|def gl\(", "\n".join(cells)), f"{chapter}: glue through lab.book.facts.glue_all"
        for builder in ("effect_words", "ablation_summary", "bars_sentence", "launch_words"):
            assert builder not in text, f"{chapter} still builds prose in Python ({builder})"


def test_the_method_appendix_is_the_last_part_of_the_book():
    toc = yaml.safe_load((REPO_ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = [entry["file"] for part in toc["parts"] for entry in part["chapters"]]
    after = files[files.index("book/appendix-method") + 1:]
    assert all("reference" in name or "bibliograph" in name for name in after), (
        f"only a references page may follow the method appendix, found {after}")


# --- the page module and the tables generated from the registry ----------------------------------------

import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402

from lab.book import pages  # noqa: E402
from lab.book.pages import appendix  # noqa: E402
from lab.results import records  # noqa: E402
from lab.results.quantities import Quantity  # noqa: E402

DATA = REPO_ROOT / "data"
APPENDIX = BOOK / "appendix-method.md"


@pytest.fixture(scope="module")
def facts():
    return appendix.facts()


def test_every_number_of_the_method_sections_from_data_has_a_quantity_name(facts):
    """The appendix's own sections name every number they read from data/; the busy-server section states chapter
    6b's facts as chapter 6b's modules give them (they are named where chapter 6b declares them)."""
    busy = set(appendix.busy_server_facts())
    unnamed = [name for name, fact in facts.items() if name not in busy and fact.source.startswith("data/")
               and isinstance(fact.value, (int, float)) and not isinstance(fact.value, bool) and not fact.quantity]
    assert not unnamed


def test_the_appendix_is_one_glue_cell_and_calls(facts):
    cells = re.findall(r"```\{code-cell\}[^\n]*\n(.*?)\n```", APPENDIX.read_text(encoding="utf-8"), flags=re.S)
    assert sum("glue_all(" in cell for cell in cells) == 1
    for cell in cells:
        code = [line for line in cell.splitlines() if line.strip() and not line.startswith(":")]
        assert all(line.startswith(("from ", "import ", "appendix.", "glue_all(")) or not line.strip()
                   for line in code), f"a cell of the appendix does more than call its page module:\n{cell}"


def _provenance(folder: str) -> dict:
    return json.loads((DATA / folder / "provenance.json").read_text())


def test_the_runs_table_has_one_row_per_run_with_its_provenance():
    rows = {row["run"]: row for row in appendix.run_rows()}
    assert list(rows) == [f"data/{run.folder}" for run in records.RUNS]
    bandwidth = rows["data/h200/bandwidth"]
    prov = _provenance("h200/bandwidth")
    assert bandwidth["command"] == prov["command"] and bandwidth["date"] == prov["date"][:10]
    assert bandwidth["what it measured"] == records.run("h200/bandwidth").measured
    parts = rows["data/h200/kernels-repeats"]   # a run of several parts: its first command, and how many more
    assert "and 2 more" in parts["command"] and parts["code"] == _provenance("h200/kernels-repeats/run1")["code"].removeprefix("commit ")
    # a run's count of quantities is the registry's
    declared = [q for q, _ in pages.declared().values()]
    assert bandwidth["quantities of record"] == sum(q.run == "h200/bandwidth" for q in declared)


def test_a_planted_quantity_shows_in_the_runs_and_quantities_tables(monkeypatch):
    planted = Quantity("h200.test.planted_ms", "a planted time", run="h200/kernels-race", file="prefill.csv", unit="ms",
                       others={"h200/kernels-ablation": "timed minutes later in its own process"})
    real = pages.declared()
    monkeypatch.setattr(appendix, "declared", lambda: {**real, planted.name: (planted, "tests")})
    rows = {row["run"]: row for row in appendix.run_rows()}
    race, ablation = rows["data/h200/kernels-race"], rows["data/h200/kernels-ablation"]
    assert race["quantities of record"] == sum(q.run == "h200/kernels-race" for q, _ in real.values()) + 1
    assert "data/h200/kernels-ablation: timed minutes later" in race["other runs of its measurements"]
    assert "another run of h200.test.planted_ms (record: data/h200/kernels-race)" in ablation["other runs of its measurements"]
    quantities = {row["quantity"]: row for row in appendix.quantity_rows()}
    assert quantities["h200.test.planted_ms"]["other runs"] == "data/h200/kernels-ablation"
    assert len(quantities) == len(real) + 1


def test_the_folders_table_maps_every_data_folder_to_the_command_that_made_it():
    made = {row["folder"]: row for row in appendix.data.made_by()}
    on_disk = {p.parent.relative_to(DATA).as_posix() for p in DATA.rglob("provenance.json")
               if not p.parent.relative_to(DATA).as_posix().startswith("local")}
    assert set(made) == on_disk
    for folder in on_disk:
        assert made[folder]["command"] == str(_provenance(folder).get("command", ""))
    table = appendix.folders_table().data
    assert len(table) == len(on_disk) and table["code"].ne("").all()


def test_the_datasets_command_prints_the_same_table_as_markdown():
    done = subprocess.run([sys.executable, "-m", "lab", "datasets", "--commands"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=300, check=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("| `data/")]
    assert len(lines) == len(appendix.data.made_by())
    hopper = next(line for line in lines if "kernels-hopper-race" in line)
    assert hopper.count(" | ") == 4, "a pipe inside a command must not split the cell"
    assert "`python -m lab tuning-race --out" in hopper, "the script the race ran as is a command now"


def test_every_folder_names_the_command_that_makes_it_now():
    for row in appendix.data.made_by():
        assert not row["now"].startswith(("scripts/", "python3 ", "python scripts/")), row
        if row["command"].startswith(("python", "scripts/")):
            assert row["now"].startswith("python -m lab "), row


def test_the_copy_beside_the_read_stream_is_steady_and_the_paged_runs_is_not(facts):
    """The appendix's claim: the ceiling run's copy rate rises a little with size (steady slope); the paged-decode
    run's copy of a gigabyte ran far below its copy of 64 MB."""
    import pandas as pd

    copies = pd.read_csv(DATA / "h200/bandwidth/read_stream.csv").query("kind == 'copy'").sort_values("size_bytes")
    assert copies.gb_per_s.is_monotonic_increasing
    steps = (2 * copies.size_bytes.diff() / (copies.ms.diff() / 1e3)).dropna()
    assert (steps.max() - steps.min()) / steps.median() < 0.05
    assert facts["copy_large_gbs"].value < 0.8 * facts["copy_small_gbs"].value
    assert facts["copy_slope_tbs"].value == pytest.approx(steps.median() / 1e12, rel=0.02)


@pytest.mark.parametrize("table", ["block_table", "clock_table", "bars_table", "blocks_bars_table", "decode_bars_table",
                                   "ceiling_table", "runs_table", "quantities_table", "folders_table"])
def test_tables_have_headers_and_no_raw_python(table):
    html = getattr(appendix, table)().to_html()
    assert "<th" in html and not re.search(r">\s*nan\s*<", html)
    assert not re.search(r'<th[^>]*class="row_heading', html), f"{table} shows an index column"

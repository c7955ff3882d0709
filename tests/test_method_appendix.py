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

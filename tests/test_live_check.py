"""lab.book.live_check (scripts/check_live.sh): chapters executed in kernels of their own, limits, the summary."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from lab import REPO_ROOT
from lab.book import live_check


def _chapter(folder: Path, name: str, code: str) -> Path:
    path = folder / f"{name}.md"
    path.write_text("---\njupytext:\n  text_representation: {extension: .md, format_name: myst, format_version: 0.13}\n"
                    "kernelspec: {display_name: Python 3, language: python, name: python3}\n---\n\n# A chapter\n\n"
                    "```{code-cell} ipython3\n" + code + "\n```\n")
    return path


def test_the_book_chapters_are_read_from_the_toc_and_the_gpu_ones_are_found():
    chapters = [p.stem for p in live_check.toc_chapters()]
    assert chapters[0] == "intro" and "06-vllm-sweeps" in chapters and "07-the-trace" in chapters
    lanes = {p.stem: live_check.lane_of(p) for p in live_check.toc_chapters()}
    assert {name for name, lane in lanes.items() if lane == "gpu"} >= {"01-roofline", "04-flashattention-triton",
                                                                       "05-decode-split-kv", "06-vllm-sweeps", "07-the-trace"}
    # its page module takes chapter 1's facts, which measure the GPU when live (an H100 run measured it twice at once)
    assert lanes["02-naive-attention"] == "gpu"
    assert {p.stem for p in live_check.toc_chapters() if live_check.quotes(p)} == {"08-interview-prep", "09-course-kit"}


def test_a_chapter_whose_page_modules_measure_on_the_gpu_is_in_the_gpu_lane(tmp_path):
    """The lane follows the page modules a chapter's cells import, and those they import: ch02 imports ch01, whose
    facts measure this machine; ch03 measures nothing. A name imported from a page module is no module."""
    via = _chapter(tmp_path, "via", "from lab.book.pages import ch02")
    direct = _chapter(tmp_path, "direct", "from lab.book.pages.ch01 import facts")
    quiet = _chapter(tmp_path, "quiet", "from lab.book.pages import ch03")
    assert [live_check.lane_of(md) for md in (via, direct, quiet)] == ["gpu", "gpu", "cpu"]
    assert {"lab.book.pages.ch01", "lab.book.pages.ch02", "lab.book.pages"} <= set(live_check.page_modules(via))
    assert "lab.book.pages.ch01" not in live_check.page_modules(quiet)
    assert not live_check.quotes(via)
    assert live_check.quotes(_chapter(tmp_path, "kit", "from lab.book.pages import course_kit"))


def test_quoting_pages_run_after_the_pages_they_quote_and_find_their_facts_without_a_built_site(tmp_path):
    """The pages glue into the run's own registry (OUT/facts); a quoting page listed first still runs last and
    reads what was glued there (a value no site build holds); one whose page failed names the facts missing."""
    quote = "from lab.book.quoted import quoted\n"
    chapters = [
        _chapter(tmp_path, "q-ok", quote + "assert quoted({'book/a-glues': ('lc_answer',)})['lc_answer'].value == 41"),
        _chapter(tmp_path, "a-glues", "from lab import env\nenv.detect()\nfrom lab.book.facts import glue_all\n"
                                      "glue_all({'lc_answer': 41})"),
        _chapter(tmp_path, "b-fails", "raise ValueError('no data')\nfrom lab.book.facts import glue_all\n"
                                      "glue_all({'lc_other': 1})"),
        _chapter(tmp_path, "q-missing", quote + "quoted({'book/b-fails': ('lc_other',)})"),
    ]
    out = tmp_path / "out"
    (out / "facts" / "book").mkdir(parents=True)
    (out / "facts" / "book" / "b-fails.json").write_text(       # an earlier run's: not quoted from
        json.dumps({"page": "book/b-fails", "facts": [{"page": "book/b-fails", "name": "lc_other", "value": 1,
                                                       "shown": 1}]}))
    lines = []
    results = live_check.check_all(chapters, out, default=120, overrides={}, budget_s=None, jobs=2,
                                   say=lines.append)
    by_name = {r.chapter: r for r in results}
    assert [r.chapter for r in results] == ["q-ok", "a-glues", "b-fails", "q-missing"]
    assert (by_name["a-glues"].lane, by_name["q-ok"].lane) == ("gpu", "cpu")
    assert [by_name[n].status for n in ("q-ok", "a-glues", "b-fails")] == ["ok", "ok", "error"], results
    assert by_name["q-missing"].status == "error" and "book/b-fails: lc_other" in by_name["q-missing"].error
    events = [m.groups() for m in map(re.compile(r"\[live-check\] (\S+): (started|ok|error)").match, lines) if m]
    order = [f"{name} {what}" for name, what in events]
    assert order[-4:] == ["q-ok started", "q-ok ok", "q-missing started", "q-missing error"]
    assert {"a-glues ok", "b-fails error"} <= set(order[:-4])
    assert json.loads((out / "facts" / "book" / "a-glues.json").read_text())["facts"][0]["value"] == 41


def test_the_course_kit_counts_slides_in_this_runs_chapters_without_a_built_site(tmp_path):
    """The course kit reads each deck's chapter as executed (lab.book.slides.load_chapter): under the live check,
    the run's own notebooks (OUT/notebooks), their glued values taken from their outputs, not _build's."""
    kit = _chapter(tmp_path, "q-kit", "from lab.book.quoted import quoted\nfrom pathlib import Path\n"
                                      "from lab.book import slides\n"
                                      f"nb, glue = slides.load_chapter('a-glues', book_dir=Path({str(tmp_path)!r}))\n"
                                      "assert 'lc_answer' in glue, glue")
    glues = _chapter(tmp_path, "a-glues", "from lab.book.facts import glue_all\nglue_all({'lc_answer': 41})")
    out = tmp_path / "out"
    (out / "notebooks").mkdir(parents=True)
    (out / "notebooks" / "q-stale.ipynb").write_text("{}")    # an earlier run's: not counted from
    results = live_check.check_all([kit, glues], out, default=120, overrides={}, budget_s=None, jobs=2,
                                   say=lambda line: None)
    assert [(r.chapter, r.status) for r in results] == [("q-kit", "ok"), ("a-glues", "ok")], results
    assert not (out / "notebooks" / "q-stale.ipynb").exists()


def test_a_chapter_runs_in_its_own_kernel_and_reports_what_it_measured(tmp_path):
    md = _chapter(tmp_path, "01-fake", "import os\nfrom lab import env\nassert 'LAB_STATIC' not in os.environ\n"
                                       "assert os.environ['LAB_PANEL_AUTORUN'] == '1'\nenv.note_live('a matmul')")
    result = live_check.run_chapter(md, "gpu", 120, tmp_path / "out", say=lambda line: None)
    assert (result.status, result.measured, result.error) == ("ok", "a matmul", "")
    assert (tmp_path / "out" / "notebooks" / "01-fake.ipynb").exists()


def test_an_error_is_named_and_a_chapter_over_its_limit_is_stopped(tmp_path):
    bad = live_check.run_chapter(_chapter(tmp_path, "bad", "raise ValueError('no such shape')"), "cpu", 120,
                                 tmp_path / "out", say=lambda line: None)
    assert bad.status == "error" and "ValueError: no such shape" in bad.error
    slow = live_check.run_chapter(_chapter(tmp_path, "slow", "import time\ntime.sleep(300)"), "cpu", 8,
                                  tmp_path / "out", say=lambda line: None)
    assert slow.status == "timeout" and slow.seconds < 60
    leftover = subprocess.run(["pgrep", "-f", "time.sleep(300)"], capture_output=True, text=True).stdout.split()
    assert leftover == []


def test_the_budget_skips_what_it_cannot_start_and_the_summary_is_written(tmp_path, capsys):
    chapters = [_chapter(tmp_path, "a", "x = 1"), _chapter(tmp_path, "b", "from lab import env\nenv.detect()")]
    results = live_check.check_all(chapters, tmp_path / "out", default=60, overrides={}, budget_s=20, jobs=1,
                                   say=lambda line: None)
    assert [r.status for r in results] == ["skipped", "skipped"]     # under MIN_START_S left from the start
    args = type("Args", (), {"budget_s": 20, "limit_s": 60, "jobs": 1})()
    live_check.write_summary(tmp_path / "out", results, args, 1.0)
    table = pd.read_csv(tmp_path / "out" / "summary.csv")
    assert list(table.columns) == list(live_check.COLUMNS) and list(table.chapter) == ["a", "b"]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["passed"] == 0 and summary["of"] == 2
    assert json.loads((tmp_path / "out" / "provenance.json").read_text())["kind"] == "live-check"


def test_a_file_with_no_code_cells_is_an_error_not_a_pass(tmp_path):
    md = tmp_path / "prose.md"
    md.write_text("# Only prose\n\nNo code here.\n")
    result = live_check.run_chapter(md, "cpu", 60, tmp_path / "out", say=lambda line: None)
    assert result.status == "error" and "no code cells" in result.error


def test_a_server_left_behind_by_a_chapter_is_killed(tmp_path):
    import os
    import sys

    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
    (tmp_path / "flash_attn-fa3.pgid").write_text(str(orphan.pid))
    assert live_check.stop_leftover_servers(tmp_path) == [orphan.pid]
    assert orphan.wait(timeout=10) == -9 and not list(tmp_path.glob("*.pgid"))
    assert os.path.exists(tmp_path)


def test_bad_input_is_one_line():
    import argparse
    with pytest.raises(argparse.ArgumentTypeError, match="no chapter 'nine'"):
        live_check.chapter_list("nine")
    with pytest.raises(argparse.ArgumentTypeError, match="CHAPTER=SECONDS"):
        live_check.chapter_limit("06-vllm-sweeps")
    assert live_check.chapter_limit("06b-busy-server.md=300") == ("06b-busy-server", 300.0)
    done = subprocess.run([str(REPO_ROOT / "scripts" / "check_live.sh"), "--chapters", "nine"], capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin", "PYTHON": str(Path(__import__("sys").executable))})
    assert done.returncode == 2 and done.stderr.strip().startswith(
        "error: python -m lab live-check: argument --chapters: no chapter 'nine'")


def test_every_chapter_that_starts_a_vllm_server_has_a_limit_that_covers_a_cold_start():
    """Chapter 06b timed out at 150 s on a cold start on the H200 (issue 36). The cold start allowed is the longest
    start to ready of a FA3, FlexAttention or Triton server in data/h200/; every H200 live run of record passes
    under the default limits, and the vLLM chapters of one run fit the default budget."""
    import csv
    import json

    started = {live_check.VLLM_MARKERS[0]: "06-vllm-sweeps", live_check.VLLM_MARKERS[1]: "06b-busy-server",
               live_check.VLLM_MARKERS[2]: "07-the-trace"}
    chapters = {p.stem: p for p in live_check.toc_chapters()}
    assert {name for name, p in chapters.items() if live_check.starts_vllm(p)} == set(started.values())
    def ready_s(record):      # wherever a provenance keeps its server's record (flags.server, server, ...)
        if isinstance(record, dict):
            yield from ([record["ready_s"]] if "ready_s" in record else [])
            for value in record.values():
                yield from ready_s(value)
    ready = [r for p in (REPO_ROOT / "data" / "h200").rglob("provenance.json") if "fa2" not in p.parent.name
             for r in ready_s(json.loads(p.read_text()))]
    assert len(ready) >= 10 and live_check.VLLM_COLD_START_S >= max(ready)
    for name in started.values():
        assert live_check.default_limit(chapters[name]) >= live_check.VLLM_COLD_START_S + 60
    seen = {}
    for summary in (REPO_ROOT / "data" / "h200" / "live-check").glob("*/summary.csv"):
        for row in csv.DictReader(summary.open()):
            seen[row["chapter"]] = max(seen.get(row["chapter"], 0.0), float(row["seconds"]))
    seen["06b-busy-server"] = max(seen.get("06b-busy-server", 0.0), 134.0)   # its pass with a longer limit (issue 36)
    for name, seconds in seen.items():
        assert seconds < live_check.default_limit(chapters[name]), name


class _Clock:
    """Time as the fake chapters spend it: each runs to the limit it is given (no test waits on the real clock)."""

    def __init__(self):
        self.now, self.lock = 0.0, __import__("threading").Lock()

    def monotonic(self) -> float:
        return self.now

    def run_chapter(self, md, lane, limit_s, out, say):
        with self.lock:
            self.now += limit_s
        return live_check.ChapterResult(md.stem, lane, "ok", limit_s, limit_s)


def _defaults():
    import argparse

    parser = argparse.ArgumentParser()
    live_check.add_arguments(parser)
    return parser.parse_args([])


def test_the_default_budget_never_cuts_a_chapter_short(monkeypatch, tmp_path):
    """On a fresh H100 the budget of 540 s left chapter 07 a 77 s limit (its cold vLLM start alone takes longer).
    With the defaults every chapter gets its whole limit even when every one before it used all of its own, and the
    check says at the start how long that is: the GPU lane's limits, then the quoting pages' (README.md says so)."""
    clock, lines = _Clock(), []
    monkeypatch.setattr(live_check, "time", clock)
    monkeypatch.setattr(live_check, "run_chapter", clock.run_chapter)
    args, chapters = _defaults(), live_check.toc_chapters()
    results = live_check.check_all(chapters, tmp_path / "out", default=args.limit_s, overrides=dict(args.limit),
                                   budget_s=args.budget_s, jobs=args.jobs, say=lines.append)
    for md, result in zip(chapters, results, strict=True):
        if result.lane != "text":
            assert (result.status, result.limit_s) == ("ok", live_check.default_limit(md)), md.stem
    gpu = sum(r.limit_s for md, r in zip(chapters, results, strict=True) if r.lane == "gpu" and not live_check.quotes(md))
    quoting = sum(r.limit_s for md, r in zip(chapters, results, strict=True) if live_check.quotes(md))
    assert lines[0].startswith(f"[live-check] {len(chapters)} chapters; at most {gpu + quoting:.0f} s")
    section = (REPO_ROOT / "README.md").read_text(encoding="utf-8").split("## Running chapters live on a GPU box")[1]
    script = subprocess.run([str(REPO_ROOT / "scripts" / "check_live.sh"), "--help"], capture_output=True, text=True)
    for where, text in {"README.md": section.split("\n## ")[0], "check_live.sh --help": script.stdout,
                        "live-check --help": live_check.__doc__}.items():
        assert f"{gpu + quoting:,.0f} s" in " ".join(text.split()), where


def test_a_budget_still_caps_the_check(monkeypatch, tmp_path):
    """--budget-s (a ten-minute device call): a chapter gets what is left of it, and one left under MIN_START_S is
    skipped."""
    clock = _Clock()
    monkeypatch.setattr(live_check, "time", clock)
    monkeypatch.setattr(live_check, "run_chapter", clock.run_chapter)
    chapters = [_chapter(tmp_path, name, "from lab import env\nenv.detect()") for name in "abcd"]
    results = live_check.check_all(chapters, tmp_path / "out", default=150, overrides={}, budget_s=350, jobs=1,
                                   say=lambda line: None)
    assert [(r.lane, r.status, r.limit_s) for r in results] == [
        ("gpu", "ok", 150), ("gpu", "ok", 150), ("gpu", "ok", 50), ("gpu", "skipped", 0.0)]

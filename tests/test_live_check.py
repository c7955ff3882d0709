"""lab.book.live_check (scripts/check_live.sh): chapters executed in kernels of their own, limits, the summary."""

from __future__ import annotations

import json
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
    assert lanes["02-naive-attention"] == "cpu"


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
    gpu_lane = sum(seconds for name, seconds in seen.items() if live_check.lane_of(chapters[name]) == "gpu")
    assert gpu_lane < live_check.DEFAULT_BUDGET_S < 600    # one device call on the lent H200 is at most 10 minutes

"""lab.book.jupyter_check (scripts/check_live.sh --jupyter): JupyterLab started on 127.0.0.1 with a token, a
chapter opened through its contents API and run cell by cell in a kernel over the websocket, as on the GPU box.

A small chapter stands in for chapter 04: its "panel" cell notes what it measured (lab.env.note_live), as a run
panel does; a second chapter fails in its first cell.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import jupyterlab  # noqa: F401  (requirements.txt installs it: this test runs, it does not skip)
import pytest

from lab import REPO_ROOT

HEADER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
"""
CELL = "```{{code-cell}} ipython3\n{}\n```\n"


def _chapter(book, name: str, *cells: str) -> None:
    book.mkdir(exist_ok=True)
    (book / f"{name}.md").write_text(HEADER + "\n# A chapter\n\nSome prose.\n\n" + "\n".join(CELL.format(c) for c in cells))


def _check(book, out, chapter: str, panel: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("LAB_STATIC", None)
    return subprocess.run([sys.executable, "-m", "lab", "jupyter-check", "--book", str(book), "--chapter", chapter,
                           "--panel", panel, "--out", str(out), "--ready-timeout", "300", "--cell-timeout", "300"],
                          capture_output=True, text=True, env=env, timeout=900, cwd=REPO_ROOT)


def test_a_chapter_opens_in_jupyterlab_and_its_panel_cell_runs_in_a_kernel(tmp_path):
    book, out = tmp_path / "book", tmp_path / "out"
    _chapter(book, "ch", 'import os\nprint("cwd", os.getcwd())',
             'from lab import env\nenv.note_live("3 lengths timed")\nprint("panel ran")', 'raise SystemExit("not run")')
    done = _check(book, out, "ch", "note_live(")
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ok"] and summary["measured"] == ["3 lengths timed"] and summary["chapter"] == "ch"
    assert [(c["cell"], c["status"]) for c in summary["cells"]] == [(1, "ok"), (2, "ok")]   # the third is not run
    assert summary["cells"][0]["printed"] == f"cwd {book}\n"          # the kernel runs in the chapter's folder
    assert {"jupyterlab-jupytext", "jupyter-widgets-jupyterlab-manager"} <= set(summary["lab_extensions"])
    assert summary["url"].startswith("http://127.0.0.1:") and summary["lab_page_bytes"] > 1000
    assert "the panel ran: 3 lengths timed" in done.stdout.splitlines()[-1]
    assert json.loads((out / "provenance.json").read_text())["flags"]["check"] == "jupyterlab"
    port = int(summary["url"].split(":")[2].split("/")[0])
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), timeout=10):
        pass                                                              # the server was stopped


def test_a_failing_cell_is_named_and_the_check_fails(tmp_path):
    book, out = tmp_path / "book", tmp_path / "out"
    _chapter(book, "bad", 'raise ValueError("no such shape")', "kernel_panel()")
    done = _check(book, out, "bad", "kernel_panel(")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "cell 1: error: ValueError: no such shape" in done.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert not summary["ok"] and summary["cells"][0]["error"] == "ValueError: no such shape"

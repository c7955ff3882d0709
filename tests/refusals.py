"""One check for every refused command (issue 18): exit status not 0, at most three lines on stderr, no
traceback, and every file that existed before is byte-identical after."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from lab import REPO_ROOT
from lab.__main__ import main as lab_main


def snapshot(*roots: Path) -> dict[Path, bytes]:
    """The bytes of every file under ``roots`` (files or folders)."""
    files = {}
    for root in map(Path, roots):
        for path in [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file()):
            files[path] = path.read_bytes()
    return files


def refused(argv: list[str], *watched: Path) -> str:
    """Run ``python -m lab ARGV`` in this process; assert it was refused cleanly; return its stderr."""
    before = snapshot(*watched)
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = lab_main([str(a) for a in argv])
        except SystemExit as exc:      # argparse's own refusals
            code = exc.code
    text = err.getvalue()
    lines = [line for line in text.splitlines() if line.strip()]
    assert code not in (0, None), f"{argv} exited 0:\n{out.getvalue()[-500:]}"
    assert 1 <= len(lines) <= 3, f"{argv} printed {len(lines)} lines:\n{text}"
    assert "Traceback" not in text + out.getvalue()
    assert snapshot(*watched) == before, f"{argv} changed files it should have left alone"
    return text


def lab_process(argv: list, *, reader: bool = False, **kw) -> subprocess.CompletedProcess:
    """``python -m lab ARGV`` in a child process (this checkout first on the path). ``reader=True`` runs it as
    an ordinary user (uid 65534 through setpriv when the tests run as root, who could read every file), so a
    file with mode 000 is unreadable to it."""
    prefix = []
    if reader and os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: cannot make a file unreadable")
        prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **kw.pop("env", {})}
    return subprocess.run([*prefix, sys.executable, "-m", "lab", *map(str, argv)], cwd=kw.pop("cwd", REPO_ROOT), env=env,
                          capture_output=True, text=True, timeout=kw.pop("timeout", 300), **kw)


def one_line_refusal(proc: subprocess.CompletedProcess, code: int = 2) -> str:
    """The refusal of a child process: exit ``code``, one line on stderr, no traceback; returns the line."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == code, (proc.returncode, proc.stderr[-2000:], proc.stdout[-500:])
    assert len(lines) == 1 and "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-2000:]
    return lines[0]

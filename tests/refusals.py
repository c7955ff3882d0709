"""One check for every refused command (issue 18): exit status not 0, at most three lines on stderr, no
traceback, and every file that existed before is byte-identical after."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

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

"""Shared test setup."""

# Kernels tests (issue 5): Triton reads TRITON_INTERPRET when it is imported, so without a GPU the
# interpreter must be switched on before any test module imports triton.
from lab import env as _env

_env.use_triton_interpreter_without_gpu()

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab import REPO_ROOT


def _jupyter_book() -> list[str]:
    exe = Path(sys.executable).with_name("jupyter-book")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "jupyter_book.cli.main"]


@pytest.fixture(scope="session")
def built_site() -> Path:
    """Build the whole site once per test session (as scripts/build_site.sh does) and return _build/html.

    The build executes every chapter against the cached data with warnings as errors; a failing
    cell or any warning fails every test that needs the site, with the build log in the message.
    """
    html = REPO_ROOT / "_build" / "html"
    if os.environ.get("LAB_REUSE_SITE") == "1" and (html / "index.html").exists():
        return html  # developer shortcut: reuse a site built a moment ago
    env = {**os.environ, "LAB_STATIC": "1", "PYTHONWARNINGS": "default"}
    proc = subprocess.run([*_jupyter_book(), "build", str(REPO_ROOT), "--warningiserror", "--keep-going", "--quiet"],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=1800)
    log = (proc.stdout + proc.stderr)[-8000:]
    if proc.returncode != 0:
        pytest.fail(f"book build failed (exit {proc.returncode}):\n{log}", pytrace=False)
    return html

"""The code passes the project's linter (rules in pyproject.toml)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lab import REPO_ROOT


def test_ruff_is_clean():
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).exists():
        pytest.fail("ruff is not installed: run scripts/install.sh (it is pinned in requirements.txt)")
    proc = subprocess.run([ruff, "check", "lab", "tests"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:]

"""The code passes the project's linter (rules in pyproject.toml) and stays within its size limits:
no function above cyclomatic complexity 15 or 80 lines, no module above 600 lines (in lab/): an alarm for a module that holds two concepts;
a file's boundary is its concept, so nothing is split just to pass it."""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lab import REPO_ROOT

MAX_COMPLEXITY = 15
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 600


def _ruff() -> str:
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).exists():
        pytest.fail("ruff is not installed: run scripts/install.sh (it is pinned in requirements.txt)")
    return ruff


def test_ruff_is_clean():
    proc = subprocess.run([_ruff(), "check", "lab", "tests"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:]


def test_no_function_in_lab_is_too_complex():
    proc = subprocess.run([_ruff(), "check", "lab", "--select", "C90", "--config",
                           f"lint.mccabe.max-complexity={MAX_COMPLEXITY}", "--isolated", "--output-format", "concise"],
                          cwd=REPO_ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:]


def _sizes():
    for path in sorted((REPO_ROOT / "lab").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        yield path.relative_to(REPO_ROOT), len(text.splitlines()), ast.parse(text)


def test_no_module_in_lab_is_too_long():
    long = [f"{path}: {lines} lines" for path, lines, _ in _sizes() if lines > MAX_MODULE_LINES]
    assert not long, f"modules over {MAX_MODULE_LINES} lines:\n" + "\n".join(long)


def test_no_function_in_lab_is_too_long():
    long = [f"{path}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1} lines"
            for path, _, tree in _sizes() for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(long)

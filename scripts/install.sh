#!/usr/bin/env bash
# Create .venv (Python 3.11+) and install the book's CPU stack into it. Safe to run again.
# PYTHON=python3.12 scripts/install.sh picks another interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
"$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "error: Python 3.11 or newer is needed (found $("$py" --version 2>&1)); set PYTHON=..." >&2; exit 2; }
[ -x .venv/bin/python ] || "$py" -m venv .venv
pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
# torch first, pinned: an unpinned torch would pull a multi-GB CUDA build onto a CPU machine.
.venv/bin/python -c 'import torch' 2>/dev/null || "${pip[@]}" "torch==2.13.0"
"${pip[@]}" -r requirements.txt
"${pip[@]}" --no-deps -e .
echo "installed into $(pwd)/.venv"

#!/usr/bin/env bash
# Install everything and build the site from the cached data in data/. Warnings fail the build.
# Usage: scripts/build_site.sh [--no-install]
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${1:-}" = "--no-install" ] || bash scripts/install.sh
rm -rf _build/html
# this checkout's lab, whichever checkout the venv's editable install points at (a git worktree shares one venv)
export PYTHONPATH="$(pwd)${PYTHONPATH:+:$PYTHONPATH}"
# LAB_STATIC=1: explorers render their static (in-browser) face; chapters read cached data.
# PYTHONWARNINGS=default: a warning raised inside a chapter reaches its output and fails the build.
LAB_STATIC=1 PYTHONWARNINGS=default .venv/bin/jupyter-book build . --all --warningiserror --keep-going --quiet
# the course kit's slide decks, exported from the executed chapters into _build/html/slides/
.venv/bin/python -m lab slides
echo "site built: $(pwd)/_build/html/index.html"

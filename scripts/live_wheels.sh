#!/usr/bin/env bash
# Download, on a machine with registry access, the wheels that scripts/check_live.sh and JupyterLab need on a
# GPU box that has no network and only a stock PyTorch image (torch, triton, numpy, pandas, matplotlib, pytest):
# the notebook machinery (jupytext, nbclient, ipykernel, ipywidgets, myst-nb), JupyterLab and its server (to open
# a chapter and press Run in its panel) and the book's small extras.
#
#   scripts/live_wheels.sh [DIR]        # default .wheels/ (git-ignored); then carry DIR to the GPU box
#   WHEELS=DIR scripts/check_live.sh    # there: installs DIR/*.whl offline into a target folder first
#
# Wheels are for CPython 3.12, manylinux x86_64, binary only; versions are the ones this project tests
# with. Packages the box already has (DEVICE_HAS below, from the image's package list) are dropped so the
# image's own versions are used, and so are three optional ones (NOT_CARRIED). About 35 MiB in all (JupyterLab
# 17 MiB, Babel 11 MiB); every wheel is below 46 MiB, so none needs splitting; the script checks that and prints
# the folder's size.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
dir=${1:-.wheels}
py=${PYTHON:-python3}
[ -x .venv/bin/python ] && py=.venv/bin/python
[ -x /work/main/.venv/bin/python ] && [ -z "${PYTHON:-}" ] && py=/work/main/.venv/bin/python
mkdir -p "$dir"
# What executing the chapters needs beyond a stock PyTorch image (versions as in the tested .venv).
# JupyterLab 4.6.6 with its server (jupyter_server, jupyterlab_server, ...): what `jupyter lab book/` and
# scripts/check_live.sh --jupyter need; jupytext's wheel carries its JupyterLab extension (MyST files open as notebooks).
want=(jupytext==1.19.6 nbclient==0.11.0 nbformat==5.11.1 ipykernel==7.4.0 ipython==9.18.1 ipywidgets==8.1.9
      jupyter_client==8.10.0 jupyter_core==5.9.1 pyzmq==27.3.0 tornado==6.6.1 traitlets==5.16.1
      comm==0.2.3 ijson==3.6.0 jupyterlab==4.6.6)
# myst-nb without its dependencies: a chapter only calls myst_nb.glue, which needs IPython and docutils
# (checked with a CPython 3.12 that has only the GPU image's packages); the Sphinx side (sphinx, babel,
# jupyter-cache, sqlalchemy: ~20 MB) is for the site build.
no_deps=(myst-nb==1.4.0 docutils==0.21.2)
# Already in the GPU image (its package list, 2026-11-17): keep its versions, carry nothing for them.
DEVICE_HAS="anyio attrs certifi charset_normalizer click filelock fsspec h11 httpcore httpx idna jinja2 markdown_it_py
markupsafe mdurl numpy packaging pandas pillow pip prometheus_client psutil pygments python_dateutil pyyaml requests
setuptools six typing_extensions urllib3 wheel zipp tabulate matplotlib torch triton rich pytest pluggy iniconfig sympy"
# Optional, and 11 MiB together: jedi and parso (IPython completes without them: it looks for jedi first),
# debugpy (ipykernel runs without its debugger) and widgetsnbextension (ipywidgets' half for the classic
# notebook; JupyterLab uses jupyterlab_widgets). pip --no-deps installs the rest without them.
NOT_CARRIED="jedi parso debugpy widgetsnbextension"
plat=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64 \
         manylinux_2_24_x86_64 manylinux_2_31_x86_64 manylinux_2_34_x86_64 manylinux_2_35_x86_64; do plat+=(--platform "$p"); done
echo "downloading into $dir (CPython 3.12, manylinux x86_64, binary only) ..."
"$py" -m pip download --quiet --disable-pip-version-check --only-binary=:all: --python-version 3.12 \
    --implementation cp "${plat[@]}" -d "$dir" "${want[@]}" 2>&1 | grep -v "^WARNING: Location" || true
"$py" -m pip download --quiet --disable-pip-version-check --only-binary=:all: --python-version 3.12 --no-deps \
    --implementation cp "${plat[@]}" -d "$dir" "${no_deps[@]}" 2>&1 | grep -v "^WARNING: Location" || true
for need in "${want[@]}" "${no_deps[@]}"; do
    stem=$(echo "${need%%==*}" | tr 'A-Z-.' 'a-z__')
    ls "$dir" | tr 'A-Z-.' 'a-z__' | grep "^${stem}_" >/dev/null || {  # not -q: an early exit breaks the pipe (pipefail)
        echo "error: no wheel for $need in $dir" >&2; exit 1; }
done
removed=0
for whl in "$dir"/*.whl; do
    name=$(basename "$whl" | cut -d- -f1 | tr 'A-Z-.' 'a-z__')
    for have in $DEVICE_HAS $NOT_CARRIED; do
        if [ "$name" = "$have" ]; then rm -f "$whl"; removed=$((removed + 1)); fi
    done
done
big=$(find "$dir" -name '*.whl' -size +46M | head -1)
[ -z "$big" ] || { echo "error: $big is over 46 MiB; split it before carrying" >&2; exit 1; }
n=$(ls "$dir"/*.whl | wc -l)
echo "$n wheels ($removed dropped: the GPU image has them, or they are optional), $(du -sh "$dir" | cut -f1) in $dir"

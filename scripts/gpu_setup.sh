#!/usr/bin/env bash
# Set up a machine with an NVIDIA GPU to run the book live: .venv with vLLM 0.26 (and the PyTorch it pins),
# the book's stack, JupyterLab and this project; then print how to open the book. Safe to run again.
#
#   scripts/gpu_setup.sh                                   # with network: pip install -r requirements-gpu.txt
#   scripts/gpu_setup.sh --offline BUNDLE_DIR [WHEELS_DIR] # no network: the box's own PyTorch (2.11), vLLM from
#                                                          # the offline bundle's parts (shared/offline-vllm/
#                                                          # build.sh), the notebook stack from WHEELS_DIR
#                                                          # (scripts/live_wheels.sh) if given
#
# PYTHON picks the interpreter (default python3; 3.11 or newer). Then: scripts/check_live.sh executes
# every chapter live and writes a summary under data/local/live-check/.
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; }
case "${1:-}" in -h|--help) usage; exit 0 ;; esac
offline=""; bundle=""; wheels=""
if [ "${1:-}" = "--offline" ]; then
    offline=1; bundle=${2:-}; wheels=${3:-}
    [ -n "$bundle" ] && [ -f "$bundle/SHA256SUMS" ] || { echo "error: --offline needs the vLLM bundle folder (parts + SHA256SUMS)" >&2; exit 2; }
    [ -z "$wheels" ] || ls "$wheels"/*.whl >/dev/null 2>&1 || { echo "error: $wheels holds no .whl files" >&2; exit 2; }
elif [ -n "${1:-}" ]; then
    echo "error: unknown argument $1 (see --help)" >&2; exit 2
fi
py=${PYTHON:-python3}
"$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "error: Python 3.11 or newer is needed (found $("$py" --version 2>&1))" >&2; exit 2; }
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader \
    || echo "warning: nvidia-smi not found: the chapters will run, but without a GPU they only show cached data" >&2

if [ -z "$offline" ]; then
    [ -x .venv/bin/python ] || "$py" -m venv .venv
    pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
    echo "[1/3] vLLM 0.26, PyTorch (CUDA) and the book's stack (a few GB the first time) ..."
    "${pip[@]}" -r requirements-gpu.txt
    echo "[2/3] this project ..."
    "${pip[@]}" --no-deps -e .
else
    # the box's own PyTorch stays in use (vLLM 0.26 pins torch 2.11, which the offline bundle expects)
    [ -x .venv/bin/python ] || "$py" -m venv --system-site-packages .venv
    site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "[1/3] vLLM from the offline bundle in $bundle ..."
    grep ' part' "$bundle/SHA256SUMS" | (cd "$bundle" && sha256sum -c --quiet -) || { echo "error: missing or corrupt bundle parts in $bundle" >&2; exit 2; }
    rm -rf .venv/vllm-site.partial && mkdir -p .venv/vllm-site.partial
    cat "$bundle"/part?? | xz -dc | tar -xf - -C .venv/vllm-site.partial
    rm -rf .venv/vllm-site && mv .venv/vllm-site.partial .venv/vllm-site
    # first on sys.path, as the bundle expects (it was made for PYTHONPATH): a .pth line starting with import runs
    echo "import sys; sys.path.insert(0, '$(pwd)/.venv/vllm-site')" > "$site/lab-vllm-site.pth"
    if [ -n "$wheels" ]; then
        echo "[2/3] the notebook stack from $wheels (offline) ..."
        .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-index --no-deps "$wheels"/*.whl
    fi
    echo "$(pwd)" > "$site/lab-project.pth"   # the project itself, without a build step (no network)
fi
echo "[3/3] checking ..."
.venv/bin/python -m lab env
cat <<MSG

Done. Open the book live (chapters are MyST notebooks; JupyterLab opens them through jupytext):

    .venv/bin/jupyter lab book/

Check every chapter live on this machine (about 8 minutes on an H200; summary in data/local/live-check/):

    PYTHON=.venv/bin/python scripts/check_live.sh
MSG
if [ -n "$offline" ]; then
    echo
    echo "vLLM from the bundle needs: export VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 HF_HUB_OFFLINE=1"
    .venv/bin/python -c 'import jupyterlab' 2>/dev/null || echo "(jupyter lab needs jupyterlab, which the offline wheels do not carry; check_live.sh runs without it)"
fi

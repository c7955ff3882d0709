#!/usr/bin/env bash
# Execute every chapter live on this machine (no LAB_STATIC) and write a summary under data/local/live-check/.
#
#   scripts/check_live.sh [--limit 06-vllm-sweeps=240] [--chapters 04-flashattention-triton,...] [--budget-s 540]
#   scripts/check_live.sh --jupyter [--chapter 04-flashattention-triton]   # JupyterLab on 127.0.0.1 with a token:
#                                          # open the chapter through its server, run its cells up to its run
#                                          # panel in a kernel, report what the panel measured (lab.book.jupyter_check)
#   WHEELS=DIR scripts/check_live.sh ...   # a box without network: first install DIR/*.whl (from
#                                          # scripts/live_wheels.sh) offline into WHEELS_TARGET (default
#                                          # /tmp/live-site) and put it on PYTHONPATH
#
# Chapters run in their own kernels under a per-chapter time limit; GPU chapters one at a time, the
# others beside them, the pages that quote others (08, 09) last. No total budget unless --budget-s sets
# one: at most 1,860 s if every chapter runs to its limit (540 fits one ten-minute call). No site build
# needed: facts go to the summary folder's facts/. Writes summary.csv, summary.json, provenance.json
# (python -m lab live-check --help says more). PYTHON picks the interpreter (default .venv/bin/python,
# else python3). Exit status 0 when every chapter passed, 1 otherwise, 2 on bad input.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
py=${PYTHON:-}
if [ -z "$py" ]; then if [ -x .venv/bin/python ]; then py=.venv/bin/python; else py=python3; fi; fi
if [ -n "${WHEELS:-}" ]; then
    ls "$WHEELS"/*.whl >/dev/null 2>&1 || { echo "error: WHEELS=$WHEELS holds no .whl files (make them with scripts/live_wheels.sh)" >&2; exit 2; }
    target=${WHEELS_TARGET:-/tmp/live-site}
    echo "installing $(ls "$WHEELS"/*.whl | wc -l) wheels from $WHEELS into $target (offline) ..."
    "$py" -m pip install --quiet --disable-pip-version-check --no-index --no-deps --no-compile --no-cache-dir \
        --upgrade --target "$target" "$WHEELS"/*.whl
    export PYTHONPATH="$target${PYTHONPATH:+:$PYTHONPATH}"
    # --target skips the .pth files of what it installs; nvidia-cutlass-dsl's (FlashAttention 4) adds this folder
    [ ! -d "$target/nvidia_cutlass_dsl/dsl_packages" ] || export PYTHONPATH="$target/nvidia_cutlass_dsl/dsl_packages:$PYTHONPATH"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
unset LAB_STATIC
# NVLink multicast stays off for anything the chapters start (vLLM sets it too; this covers the rest)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ "${1:-}" = "--jupyter" ]; then shift; exec "$py" -m lab jupyter-check "$@"; fi
exec "$py" -m lab live-check "$@"

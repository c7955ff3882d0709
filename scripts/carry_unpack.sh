#!/usr/bin/env bash
# On the GPU box: check the trip folders made by scripts/carry_pack.sh (every trip there, every piece
# intact; what is missing is named) and join them into DEST/vllm-bundle/ (part files and SHA256SUMS),
# DEST/fa4/ and DEST/wheels/. Files already there and intact are kept: safe to run again.
#
#   scripts/carry_unpack.sh TRIPS_DIR DEST     # e.g. /tmp/carry (holding t0, t1, ...) /tmp/offline
#
# The same as `python -m lab carry unpack` (lab/carry.py: standard library only).
# Then: scripts/gpu_setup.sh --offline DEST/vllm-bundle DEST/wheels --fa4-wheels DEST/fa4
set -euo pipefail
export PYTHONPATH="$(cd "$(dirname "$0")/.." && pwd)${PYTHONPATH:+:$PYTHONPATH}"
exec "${PYTHON:-python3}" -m lab carry unpack "$@"

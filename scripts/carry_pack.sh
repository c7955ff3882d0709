#!/usr/bin/env bash
# Pack the GPU box's offline files into trip folders of at most TRIP_MB MiB (default 46), each small enough
# to travel with the working tree in one device call: the vLLM bundle (.carry/, from
# shared/offline-vllm/build.sh), FlashAttention 4's wheels (.fa4/) and the notebook wheels (.wheels/, from
# scripts/live_wheels.sh) become .trips/t0, t1, ... with a MANIFEST.tsv (sizes, sha256) in each.
#
#   scripts/carry_pack.sh [--vllm .carry] [--fa4 .fa4|none] [--wheels .wheels|none] [--out .trips] [--trip-mb 46]
#
# The same as `python -m lab carry pack` (lab/carry.py: standard library only, so any python3 runs it).
# On the GPU box, once every tN is in one folder: scripts/carry_unpack.sh TRIPS_DIR DEST. --help says more.
set -euo pipefail
export PYTHONPATH="$(cd "$(dirname "$0")/.." && pwd)${PYTHONPATH:+:$PYTHONPATH}"
exec "${PYTHON:-python3}" -m lab carry pack "$@"

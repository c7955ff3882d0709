#!/usr/bin/env bash
# On the GPU box: put the carried payload in place (vLLM's offline bundle, FlashAttention 4's wheels, the
# notebook wheels), once. The payload travels as CHUNKS of one tar stream (scripts/carry_trips.sh here:
# .carry/trips/chunkNN, one per device call, each copied to /tmp/carry/ on arrival).
#
#   bash scripts/h200_payload.sh [CHUNK_DIR=/tmp/carry]
#
# Unpacks into /tmp/payload/{vllm-bundle,fa4,wheels}, installs vLLM into /tmp/site (bundle parts
# checked against SHA256SUMS) and FA4 into /tmp/fa4site, and writes /tmp/lab_env.sh, which the
# measurement scripts source: PYTHONPATH with the project, vLLM, FA4 and cutlass-dsl's dsl_packages
# (a `pip install --target` skips the .pth file that would add it), VLLM_USE_FLASHINFER_SAMPLER=0.
# Safe to run again: a step already done is skipped.
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
chunks=${1:-/tmp/carry}
cd "$(dirname "$0")/.."
say() { echo "[payload $(date -u +%T)] $*"; }
if [ ! -f /tmp/payload/.complete ]; then
  [ -f "$chunks/SHA256SUMS" ] || { echo "error: $chunks/SHA256SUMS missing: copy every trip first" >&2; exit 2; }
  (cd "$chunks" && sha256sum -c --quiet SHA256SUMS) || { echo "error: chunks missing or corrupt in $chunks" >&2; exit 2; }
  rm -rf /tmp/payload && mkdir -p /tmp/payload
  cat "$chunks"/chunk?? | tar -xf - -C /tmp/payload
  touch /tmp/payload/.complete
  say "unpacked: $(ls /tmp/payload | tr '\n' ' ')"
fi
if [ ! -f /tmp/site/.complete ]; then
  (cd /tmp/payload/vllm-bundle && grep ' part' SHA256SUMS | sha256sum -c --quiet -)
  rm -rf /tmp/site.partial && mkdir -p /tmp/site.partial
  cat /tmp/payload/vllm-bundle/part?? | xz -dc -T0 | tar -xf - -C /tmp/site.partial
  rm -rf /tmp/site && mv /tmp/site.partial /tmp/site && touch /tmp/site/.complete
  say "vLLM unpacked into /tmp/site"
fi
if [ -d /tmp/payload/fa4 ] && [ ! -f /tmp/fa4site/.complete ]; then
  (cd /tmp/payload/fa4 && for first in *.whl.chunk00; do [ -e "$first" ] || continue
     whl=${first%.chunk00}; cat "$whl".chunk?? > "$whl" && rm -f "$whl".chunk??; done)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/fa4site /tmp/payload/fa4/*.whl
  touch /tmp/fa4site/.complete
  say "FlashAttention 4 installed into /tmp/fa4site"
fi
cat > /tmp/lab_env.sh <<EOF
export PYTHONPATH=$(pwd):/tmp/site:/tmp/fa4site:/tmp/fa4site/nvidia_cutlass_dsl/dsl_packages
export VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
EOF
. /tmp/lab_env.sh
python3 - <<'EOF'
import importlib
for name in ("vllm", "vllm.vllm_flash_attn", "flash_attn.cute"):
    try:
        importlib.import_module(name)
        print(f"[payload] import {name}: ok")
    except Exception as exc:
        print(f"[payload] import {name}: FAILED {type(exc).__name__}: {str(exc)[:200]}")
EOF

#!/usr/bin/env bash
# Set-up (measures nothing): unpack the carried vLLM bundle and FlashAttention 4 wheels; writes /tmp/lab_env.sh.
# On the GPU box: put the carried payload in place for the measurement scripts (vLLM's offline bundle,
# FlashAttention 4's wheels), once. The payload travels as trip folders made here by
# scripts/carry_pack.sh (.trips/t0, t1, ..., one per device call, each copied to /tmp/carry/).
#
#   scripts/gpu_run.sh payload [TRIPS_DIR=/tmp/carry]
#
# scripts/carry_unpack.sh checks and joins the trips into /tmp/payload/{vllm-bundle,fa4,wheels}; this then
# installs vLLM into /tmp/site and FA4 into /tmp/fa4site and writes /tmp/lab_env.sh, which
# scripts/gpu_run.sh kernel-parts sources: PYTHONPATH with the project, vLLM, FA4 and cutlass-dsl's dsl_packages (a
# `pip install --target` skips the .pth file that would add it), VLLM_USE_FLASHINFER_SAMPLER=0.
# (A reader's GPU box uses scripts/gpu_setup.sh --offline instead, which builds .venv.)
# Safe to run again: a step already done is skipped.
set -euo pipefail
case "${1:-}" in -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;; esac
trips=${1:-/tmp/carry}
cd "$(dirname "$0")/../.."
say() { echo "[payload $(date -u +%T)] $*"; }
bash scripts/carry_unpack.sh "$trips" /tmp/payload
if [ ! -f /tmp/site/.complete ]; then
  (cd /tmp/payload/vllm-bundle && grep ' part' SHA256SUMS | sha256sum -c --quiet -)
  rm -rf /tmp/site.partial && mkdir -p /tmp/site.partial
  cat /tmp/payload/vllm-bundle/part?? | xz -dc -T0 | tar -xf - -C /tmp/site.partial
  rm -rf /tmp/site && mv /tmp/site.partial /tmp/site && touch /tmp/site/.complete
  say "vLLM unpacked into /tmp/site"
fi
if ls /tmp/payload/fa4/*.whl >/dev/null 2>&1 && [ ! -f /tmp/fa4site/.complete ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/fa4site /tmp/payload/fa4/*.whl
  touch /tmp/fa4site/.complete
  say "FlashAttention 4 installed into /tmp/fa4site"
fi
cat > /tmp/lab_env.sh <<EOF
export PYTHONPATH=$(pwd):/tmp/site:/tmp/fa4site:/tmp/fa4site/nvidia_cutlass_dsl/dsl_packages
export VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
EOF
. /tmp/lab_env.sh
python3 -m lab probe imports

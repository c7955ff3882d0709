#!/usr/bin/env bash
# Here (the CPU machine): pack what a GPU session carries into chunks of one tar stream, one chunk per
# device call (a call carries at most 64 MiB with the working tree, which is about 15 MiB).
#
#   bash scripts/carry_trips.sh [BUNDLE=.carry] [FA4=.fa4] [WHEELS=.wheels] [OUT=.carry/trips]
#
# BUNDLE: vLLM's offline bundle (part00.. + SHA256SUMS from shared/offline-vllm/build.sh); FA4: the
# FlashAttention 4 wheels (flash-attn-4, nvidia-cutlass-dsl + -libs-base/-core/-cu13, quack-kernels,
# apache-tvm-ffi, torch-c-dlpack-ext); WHEELS: the notebook wheels of scripts/live_wheels.sh (optional).
# A wheel over 40 MiB is cut into NAME.chunkNN files that scripts/h200_payload.sh joins again.
# Then, on the GPU box, copy each OUT/chunkNN (and OUT/SHA256SUMS with the last) to /tmp/carry/ and run
# scripts/h200_payload.sh.
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
bundle=${1:-.carry}; fa4=${2:-.fa4}; wheels=${3:-.wheels}; out=${4:-.carry/trips}
[ -f "$bundle/SHA256SUMS" ] || { echo "error: $bundle/SHA256SUMS missing: run shared/offline-vllm/build.sh $bundle" >&2; exit 2; }
stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/vllm-bundle" "$stage/fa4" "$stage/wheels"
cp "$bundle"/part?? "$bundle/SHA256SUMS" "$stage/vllm-bundle/"
for w in "$fa4"/*.whl; do
  [ -e "$w" ] || continue
  if [ "$(stat -c %s "$w")" -gt $((40 << 20)) ]; then split -b 40M -d -a 2 "$w" "$stage/fa4/$(basename "$w").chunk"
  else cp "$w" "$stage/fa4/"; fi
done
[ -d "$wheels" ] && cp "$wheels"/*.whl "$stage/wheels/" 2>/dev/null || true
rm -rf "$out" && mkdir -p "$out"
tar -C "$stage" -cf - vllm-bundle fa4 wheels | split -b "${TRIP_MB:-46}M" -d -a 2 - "$out/chunk"
(cd "$out" && sha256sum chunk?? > SHA256SUMS)
ls -l "$out"
echo "$(ls "$out"/chunk?? | wc -l) trips; carry each $out/chunkNN in its own call (SHA256SUMS with the last)"

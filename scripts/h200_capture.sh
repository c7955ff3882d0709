#!/usr/bin/env bash
# Profiler windows and kernel census on the H200 (issue 7), one vLLM server per arm:
#   FLASH_ATTN/FA3 and FLEX_ATTENTION; prefill 2k, 8k, 28k; decode 2k, 28k (decode steps only);
#   decode-naive 28k (the reference study's window, which re-prefills the prompt: the pitfall).
#
# Run from the repository root on the GPU box, with vLLM importable (the offline bundle in
# $VLLM_SITE, default /tmp/site, is put on PYTHONPATH when it exists):
#     OUT=/some/folder bash scripts/h200_capture.sh
# Optional: ARMS="FLEX_ATTENTION" (one arm per call), MAX_NUM_BATCHED_TOKENS=8192 (default: vLLM's
# own; the server log records it), WINDOWS=prefill:2048,decode:2048, PYTHON=python3.
#
# What comes back (<= 8 files, each < 16 MiB, nothing deeper than $OUT/file):
#   $OUT/<arm>-prefill.tar, $OUT/<arm>-decode.tar   each holds <arm>/<window>.trace.json.gz (<= 5 MB,
#       trimmed to the census's events when larger), <arm>/<window>.census.json, and in the prefill
#       tar also <arm>/census.csv, provenance.json, server.log
#   $OUT/capture-summary.txt   one line per window (window ms, attention share, kernel signature)
# Commit: tar -xf <tar> -C data/h200/vllm0.26-qwen2.5-7b/traces/   (both tars of an arm)
set -uo pipefail
OUT=${OUT:?set OUT to the output folder}
PYTHON=${PYTHON:-python3}
ARMS=${ARMS:-"FLASH_ATTN/FA3 FLEX_ATTENTION"}
WINDOWS=${WINDOWS:-prefill:2048,prefill:8192,prefill:28672,decode:2048,decode:28672,decode-naive:28672}
VLLM_SITE=${VLLM_SITE:-/tmp/site}
if [ -d "$VLLM_SITE" ]; then export PYTHONPATH="$VLLM_SITE${PYTHONPATH:+:$PYTHONPATH}"; fi
export VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 HF_HUB_OFFLINE=1 VLLM_RPC_TIMEOUT=1800000
work=$(mktemp -d /tmp/h200-capture.XXXXXX)
mkdir -p "$OUT"
summary="$OUT/capture-summary.txt"
: > "$summary"
chunk=()
[ -n "${MAX_NUM_BATCHED_TOKENS:-}" ] && chunk=(--max-num-batched-tokens "$MAX_NUM_BATCHED_TOKENS")

for arm in $ARMS; do
  slug=${arm//\//-}
  echo "== $arm $(date -u +%FT%TZ)" | tee -a "$summary"
  # 280 s per arm: ~80 s to start (torch.compile, CUDA graphs) + 6 windows; a hung arm cannot eat the call.
  timeout -k 20 280 "$PYTHON" -m lab capture vllm --arm "$arm" --out "$work" --windows "$WINDOWS" \
      --ready-timeout 200 "${chunk[@]}" 2>&1 | tee "$work/$slug.console.txt" | grep -v '^  waiting' | tee -a "$summary"
  status=${PIPESTATUS[0]}
  [ "$status" -ne 0 ] && { echo "!! $arm exited with status $status; last lines:" | tee -a "$summary";
                           tail -5 "$work/$slug.console.txt" >> "$summary"; tail -5 "$work/$slug/server.log" 2>/dev/null >> "$summary"; }
  if [ -f "$work/$slug/census.csv" ]; then
    ( cd "$work" && tar -cf "$OUT/$slug-prefill.tar" "$slug"/prefill-* "$slug"/census.csv \
        $(ls "$slug"/provenance.json "$slug"/server.log 2>/dev/null) 2>/dev/null
      ls "$slug"/decode* >/dev/null 2>&1 && tar -cf "$OUT/$slug-decode.tar" "$slug"/decode* )
    ls -l "$work/$slug" >> "$summary"
  fi
done
rm -rf "$work"
echo "done $(date -u +%FT%TZ)" | tee -a "$summary"

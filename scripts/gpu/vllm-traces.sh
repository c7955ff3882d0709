#!/usr/bin/env bash
# Study: profiler windows of a vLLM server per arm and their kernel-family census (with the GPU's clocks).
# Profiler windows and kernel census on the H200 (issue 7), one vLLM server per arm, in a call of
# its own (the timing sweeps of scripts/gpu_run.sh vllm-sweeps never run with the profiler configured):
#   FLASH_ATTN/FA3 and FLEX_ATTENTION; prefill 2k, 8k, 28k; decode 2k, 28k (decode steps only);
#   decode-naive 28k (the reference study's window, which re-prefills the prompt: the pitfall).
#
# Run from the repository root on the GPU box, with vLLM importable (the offline bundle in
# $VLLM_SITE, default /tmp/site, is put on PYTHONPATH when it exists):
#     OUT=/some/folder scripts/gpu_run.sh vllm-traces
# Same server settings as the sweeps: random weights in the Qwen2.5-7B shape, prefix caching off,
# --max-num-batched-tokens 8192 (CHUNK=...), --gpu-memory-utilization 0.85. Optional: ARMS="FLEX_ATTENTION",
# WINDOWS=prefill:2048,decode:2048, PYTHON=python3, DEADLINE_S (default 560: no arm starts or runs past it).
# Budget: ~75 s of start-up per arm + ~1-2 min of windows (each /stop_profile writes a trace).
#
# What comes back (<= 5 files, each < 16 MiB, none deeper than $OUT/file):
#   $OUT/h200-capture-<arm>-prefill.tar, $OUT/h200-capture-<arm>-decode.tar
#       <study>/traces/<arm>/<window>.trace.json.gz (<= 5 MB; trimmed to the events the census reads
#       when larger), <window>.census.json and <window>.clocks.json (nvidia-smi samples of SM clock,
#       power, temperature and active clock limits during the window); the prefill tar also census.csv,
#       provenance.json, server.log. ARMS sets the order too (the GPU's state can depend on what ran before).
#   $OUT/h200-capture.txt   the console: one line per window (GPU time, attention share, kernel signature)
# Commit: for t in h200-capture-*.tar; do tar -xf $t -C data/h200/; done
#   -> data/h200/vllm0.26-qwen2.5-7b/traces/{flash_attn-fa3,flex_attention}/
set -uo pipefail
OUT=${OUT:-/tmp/h200-capture-out}
WORK=${WORK:-/tmp/h200-capture}
PYTHON=${PYTHON:-python3}
CHUNK=${CHUNK:-8192}
DEADLINE_S=${DEADLINE_S:-560}
MODEL=${MODEL:-data/models/qwen2.5-7b-128k}   # as the sweeps: its limit admits the 33024-token servers
ARMS=${ARMS:-"FLASH_ATTN/FA3 FLEX_ATTENTION"}
WINDOWS=${WINDOWS:-prefill:2048,prefill:8192,prefill:28672,decode:2048,decode:28672,decode-naive:28672}
TAG=h200_capture
log="$OUT/h200-capture.txt"
source "$(dirname "$0")/env.sh"
# /stop_profile waits while the engine writes the trace: give the front-end's RPC room for it
export VLLM_RPC_TIMEOUT=${VLLM_RPC_TIMEOUT:-600000}
say "vLLM $version, $(nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader 2>/dev/null)"

n_arms=$(echo $ARMS | wc -w)
i=0
for arm in $ARMS; do
  i=$((i + 1))
  slug=$(echo "${arm//\//-}" | tr 'A-Z' 'a-z')
  left=$((DEADLINE_S - SECONDS))
  cap=$((left / (n_arms - i + 1)))          # share what is left among the arms still to run
  if [ "$cap" -lt 150 ]; then say "SKIP $arm: only ${left}s left before the deadline"; continue; fi
  say "START $arm (at most ${cap}s)"
  timeout -k 30 "$cap" "$PYTHON" -m lab capture vllm --arm "$arm" --out "$WORK/$study/traces" \
      --windows "$WINDOWS" --model "$MODEL" --max-num-batched-tokens "$CHUNK" --ready-timeout 240 2>&1 \
      | grep --line-buffered -v '^  waiting for vLLM' | tee -a "$log"
  status=${PIPESTATUS[0]}
  say "END $arm: status $status$([ "$status" = 124 ] && echo ' (cut at its time cap: the windows done so far are kept)')"
  dir="$study/traces/$slug"
  [ "$status" -ne 0 ] && tail -n 5 "$WORK/$dir/server.log" 2>/dev/null | tee -a "$log"
  if [ -f "$WORK/$dir/census.csv" ]; then
    ( cd "$WORK" && tar -cf "$OUT/h200-capture-$slug-prefill.tar" --exclude='*.tmp' $(ls -d "$dir"/prefill-* "$dir"/census.csv "$dir"/provenance.json "$dir"/server.log 2>/dev/null)
      decode=$(ls -d "$dir"/decode* 2>/dev/null)
      [ -n "$decode" ] && tar -cf "$OUT/h200-capture-$slug-decode.tar" --exclude='*.tmp' $decode )
    ls -l "$WORK/$dir" | tee -a "$log"
  fi
done
ls -l "$OUT"/*.tar 2>/dev/null | tee -a "$log"
say "done in ${SECONDS}s"

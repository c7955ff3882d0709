#!/usr/bin/env bash
# Study: vLLM prompt-length sweeps, TTFT and decode ITL per attention backend.
# vLLM prompt-length sweeps on the H200 (issue 6): TTFT and decode ITL per attention backend.
#
# Run from the repository root on the GPU box, with vLLM importable (the offline bundle in
# $VLLM_SITE, default /tmp/site, is put on PYTHONPATH when it exists):
#     OUT=/some/folder scripts/gpu_run.sh vllm-sweeps main    # FLASH_ATTN/FA3 256..131072, FLEX_ATTENTION 256..32768
#     OUT=/some/folder scripts/gpu_run.sh vllm-sweeps fa2     # FLASH_ATTN/FA2 256..32768 (start-up ~5 min: own call)
#     OUT=/some/folder scripts/gpu_run.sh vllm-sweeps extra   # TRITON_ATTN 256..32768; FA3 with 2048-token chunks
# Every arm: random weights in the Qwen2.5-7B shape (data/models/qwen2.5-7b-128k), prefix caching
# off, --max-num-batched-tokens 8192 (CHUNK=...), --gpu-memory-utilization 0.85, 64 generated
# tokens, one warm-up + 3 reps per length (2 reps from 65536 tokens). Budget for `main`: ~75 s of
# start-up per arm + ~1 min (FA3) and ~2 min (FLEX) of requests; DEADLINE_S (default 560) is the
# time after which no arm may still run, so the results are always packed before a 10-minute limit.
# A rerun resumes: lengths already in a folder are skipped (set WORK to a kept folder).
#
# What comes back (2 files per call):
#   $OUT/h200-vllm-<part>.tar.gz   <study>/<arm>/{measurements.jsonl,sweep.csv,server.log,provenance.json}
#   $OUT/h200-vllm-<part>.txt      the console of every arm and its sweep table
# Commit: tar -xzf h200-vllm-<part>.tar.gz -C data/h200/
#   -> data/h200/vllm0.26-qwen2.5-7b/{flash_attn-fa3,flex_attention,flash_attn-fa2,triton_attn}/
#      data/h200/vllm0.26-qwen2.5-7b-chunk2048/flash_attn-fa3/   (extra)
set -uo pipefail
PART=${1:-main}
OUT=${OUT:-/tmp/h200-vllm-out}
WORK=${WORK:-/tmp/h200-vllm}
PYTHON=${PYTHON:-python3}
CHUNK=${CHUNK:-8192}
DEADLINE_S=${DEADLINE_S:-560}
MODEL=${MODEL:-data/models/qwen2.5-7b-128k}
SHORT=256,512,1024,2048,4096,8192,16384,24576,32768
LONG=$SHORT,65536,131072
TAG=h200_vllm
log="$OUT/h200-vllm-$PART.txt"
source "$(dirname "$0")/env.sh"
say "part $PART, vLLM $version, $(nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader 2>/dev/null)"

# run_arm FOLDER CAP_S ARGS...: one arm, never past the deadline; its data is written even when cut short
run_arm() {
  local folder=$1 cap=$2; shift 2
  local left=$((DEADLINE_S - SECONDS))
  [ "$cap" -gt "$left" ] && cap=$left
  if [ "$cap" -lt 120 ]; then say "SKIP $folder: only ${left}s left before the deadline"; return; fi
  say "START $folder (at most ${cap}s): $*"
  local t0=$SECONDS
  timeout -k 30 "$cap" "$PYTHON" -m lab vllm-sweep --out "$WORK/$folder" --model "$MODEL" \
      --max-num-batched-tokens "$CHUNK" --gpu-memory-utilization 0.85 --reps 3 --long-reps 2 --long-from 65536 \
      --max-tokens 64 --warmup-tokens 16 "$@" 2>&1 | grep --line-buffered -v '^  waiting for vLLM' | tee -a "$log"
  local status=${PIPESTATUS[0]}
  # a sweep killed with -9 cannot stop its server: its process group id is left on disk for this
  local pgid; pgid=$(cat "$WORK/$folder/server.pgid" 2>/dev/null) && kill -9 -- "-$pgid" 2>/dev/null \
    && say "killed the server group $pgid left by $folder"; rm -f "$WORK/$folder/server.pgid"
  say "END $folder: status $status after $((SECONDS - t0))s$([ "$status" = 124 ] && echo ' (cut at its time cap; rerun to resume)')"
  [ "$status" -ne 0 ] && tail -n 5 "$WORK/$folder/server.log" 2>/dev/null | tee -a "$log"
  nvidia-smi --query-gpu=memory.used --format=csv,noheader 2>/dev/null | sed 's/^/  GPU memory in use after the arm: /' | tee -a "$log"
}

case "$PART" in
  main)
    run_arm "$study/flash_attn-fa3" 230 --backend FLASH_ATTN --fa-version 3 --lengths "$LONG"
    run_arm "$study/flex_attention" 330 --backend FLEX_ATTENTION --lengths "$SHORT" ;;
  fa2)
    run_arm "$study/flash_attn-fa2" 540 --backend FLASH_ATTN --fa-version 2 --lengths "$SHORT" --ready-timeout 480 ;;
  extra)
    run_arm "$study/triton_attn" 260 --backend TRITON_ATTN --lengths "$SHORT"
    run_arm "$study-chunk2048/flash_attn-fa3" 260 --backend FLASH_ATTN --fa-version 3 --lengths "$SHORT" \
        --max-num-batched-tokens 2048 ;;
  *) say "unknown part '$PART': use main, fa2 or extra"; exit 2 ;;
esac

( cd "$WORK" && tar -czf "$OUT/h200-vllm-$PART.tar.gz" --exclude='*.tmp' $(ls -d "$study"* 2>/dev/null) )
for table in "$WORK"/"$study"*/*/sweep.csv; do
  [ -f "$table" ] && { echo "== ${table#$WORK/}"; cat "$table"; } | tee -a "$log"
done
say "packed $(du -h "$OUT/h200-vllm-$PART.tar.gz" | cut -f1) into $OUT/h200-vllm-$PART.tar.gz; total ${SECONDS}s"

#!/usr/bin/env bash
# Study: one vLLM server under Poisson load (TTFT/TPOT/ITL, goodput), interference trials, fp8 KV concurrency.
# The busy-server study on the H200 (issue 25): Poisson load with `vllm bench serve`, one arm per call.
#
# Run from the repository root on the GPU box, with vLLM importable (the offline bundle in $VLLM_SITE,
# default /tmp/site, is put on PYTHONPATH when it exists):
#     OUT=/some/folder scripts/gpu_run.sh vllm-busy-server ARM [WORKLOAD]
#   ARM       fa3 (FLASH_ATTN/FA3, with the probe-vs-bench agreement point), flex (FLEX_ATTENTION),
#             triton (TRITON_ATTN), fa2 (FLASH_ATTN/FA2: ~300 s start), fa3-fp8 (FA3 with --kv-cache-dtype fp8)
#             fa3, flex and triton then run the interference trials on the same server (chunk 8192, vLLM's
#             default on an H200): 8 and 32 decoders (4k..32k context; FLEX 8 only, its paged decode at 32
#             such contexts takes about a second a step) and a 32768-token prompt arriving (FA3 also 98304).
#     OUT=/some/folder scripts/gpu_run.sh vllm-busy-server interference-fa3|interference-flex|interference-triton
#             the same trials on a server of its own with chunk 2048 (CHUNKS=2048,32768 for more, one server each)
#     OUT=/some/folder scripts/gpu_run.sh vllm-busy-server fp8-concurrency
#             FA3 with --kv-cache-dtype fp8: the closed-loop decode sweep at 32k context (1, 4, 16, 64 requests)
#             of lab vllm-concurrency, beside the bf16 run of vllm0.26-qwen2.5-7b-concurrency/flash_attn-fa3
#   WORKLOAD  fixed (default: 1024-token prompts, 128 generated tokens) or mix (a long-tailed mix of 300
#             prompts, log-normal lengths around 1024 in / 128 out, written from the seed)
# One server start (~80-145 s), the capacity point (200 prompts at once), then Poisson arrivals at 0.25, 0.5,
# 0.75, 0.9, 1.0 and 1.2 x that capacity, SPAN_S (default 20) s of arrivals each (60..1500 prompts), every
# point of a group in one client process (lab.measure.vllm.bench_batch): ~5-6 minutes an arm.
# DEADLINE_S (default 530) is the time after which no point starts or runs, so the results are packed
# inside a 9-minute call; a point cut off is measured by the next call (WORK kept: points done are skipped).
# Random weights in the Qwen2.5-7B shape (data/models/qwen2.5-7b-128k, --load-format dummy), the synthetic
# tokenizer (python -m lab vllm-tokenizer, made here first), prefix caching off, --max-num-batched-tokens
# 8192, --gpu-memory-utilization 0.85. NVLink multicast off for every process (NCCL_NVLS_ENABLE=0 etc.).
#
# What comes back (2 files per call):
#   $OUT/load-<arm>-<workload>.tar.gz  <study>-load/<workload>/<arm slug>/{rate-*.json,cmd,log}, points.jsonl,
#                                      server.log, provenance.json (and probe.jsonl for fa3)
#   $OUT/load-<arm>-<workload>.txt     the console
# Commit: tar -xzf load-<arm>-<workload>.tar.gz -C data/h200/
#   -> data/h200/vllm0.26-qwen2.5-7b-load/random-1024-128/flash_attn-fa3/ ...
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ARM=${1:-}
WORKLOAD=${2:-fixed}
OUT=${OUT:-/tmp/h200-load-out}
WORK=${WORK:-/tmp/h200-load}
PYTHON=${PYTHON:-python3}
DEADLINE_S=${DEADLINE_S:-530}
MODEL=${MODEL:-data/models/qwen2.5-7b-128k}
TAG=h200_load
# inter_load: interference trials run on the load arm's own server after its points (chunk 8192, which is
# vLLM 0.26's default for the API server on a GPU of 70 GiB or more: arg_utils.py, get_batch_defaults)
case "$ARM" in
  fa3) label=FLASH_ATTN/FA3; extra=(--agreement 20); inter_load=(8,32 32768,98304) ;;
  fa2) label=FLASH_ATTN/FA2; extra=(--ready-timeout 420); inter_load=() ;;
  flex) label=FLEX_ATTENTION; extra=(); inter_load=(8 32768) ;;
  triton) label=TRITON_ATTN; extra=(); inter_load=(8,32 32768) ;;
  fa3-fp8) label=FLASH_ATTN/FA3-FP8; extra=(); inter_load=() ;;
  ours) label=OURS; extra=(); inter_load=() ;;   # the book's kernels (LAB_OURS_PREFILL_CONFIG: the race's best setting)
  fp8-concurrency) label=FLASH_ATTN/FA3-FP8 ;;
  interference-fa3) label=FLASH_ATTN/FA3; inter=(--chunks "${CHUNKS:-2048}" --decoders 8,32 --long 32768,98304) ;;
  interference-flex) label=FLEX_ATTENTION; inter=(--chunks 2048 --decoders 8 --long 32768) ;;
  interference-triton) label=TRITON_ATTN; inter=(--chunks 2048 --decoders 8,32 --long 32768) ;;
  *) echo "usage: OUT=DIR scripts/gpu_run.sh vllm-busy-server fa3|flex|triton|fa2|fa3-fp8|ours|fp8-concurrency|interference-fa3|interference-flex|interference-triton [fixed|mix]"; exit 2 ;;
esac
case "$WORKLOAD" in
  fixed) wl=(--input-len 1024 --output-len 128); wname=random-1024-128 ;;
  mix) wl=(--input-len 1024 --output-len 128 --mix 300); wname=mix-1024-128 ;;
  *) echo "usage: OUT=DIR scripts/gpu_run.sh vllm-busy-server ARM fixed|mix"; exit 2 ;;
esac
name="load-$ARM-$WORKLOAD"; { [ -n "${inter+x}" ] || [ "$ARM" = fp8-concurrency ]; } && name="$ARM"
log="$OUT/$name.txt"
source "$(dirname "$0")/env.sh"
slug=$(echo "${label//\//-}" | tr 'A-Z' 'a-z')   # the arm's folder: its label in lower case, / as - (lab.measure.vllm.arms)
folder="$study-load/$wname/$slug"
if [ "$ARM" = fp8-concurrency ]; then
  folder="$study-concurrency/$slug"
  say "START $folder"
  timeout -k 30 "$((DEADLINE_S - SECONDS + 40))" "$PYTHON" -m lab vllm-concurrency --backend FLASH_ATTN --fa-version 3 \
      --kv-cache-dtype fp8 --max-num-batched-tokens 8192 --contexts 32768 --concurrency 1,4,16,64 --max-tokens 2048 \
      --steps 64 --ready-timeout 300 --stall 10 --point-timeout 150 --gpu-memory-utilization 0.85 \
      --out "$WORK/$folder" --model "$MODEL" 2>&1 | grep --line-buffered -v '^  waiting for vLLM' | tee -a "$log"
  say "END $folder: status ${PIPESTATUS[0]}"
  ( cd "$WORK" && tar -czf "$OUT/$name.tar.gz" --exclude='*.tmp' --exclude='*.pgid' "$folder" )
  say "packed $(du -h "$OUT/$name.tar.gz" | cut -f1) into $OUT/$name.tar.gz; total ${SECONDS}s"
  exit 0
fi
if [ -n "${inter+x}" ]; then
  folder="$study-interference/$slug"
  say "START $folder: ${inter[*]}"
  timeout -k 30 "$((DEADLINE_S - SECONDS + 40))" "$PYTHON" -m lab vllm-interference --arm "$label" --model "$MODEL" \
      "${inter[@]}" --deadline-s "$((DEADLINE_S - SECONDS - 10))" --out "$WORK/$folder" 2>&1 \
      | grep --line-buffered -v '^  waiting for vLLM' | tee -a "$log"
  say "END $folder: status ${PIPESTATUS[0]}"
  for g in "$WORK/$folder"/*/server.pgid; do [ -f "$g" ] && kill -9 -- "-$(cat "$g")" 2>/dev/null; rm -f "$g"; done
  ( cd "$WORK" && tar -czf "$OUT/$name.tar.gz" --exclude='*.tmp' --exclude='*.pgid' "$folder" )
  say "packed $(du -h "$OUT/$name.tar.gz" | cut -f1) into $OUT/$name.tar.gz; total ${SECONDS}s"
  exit 0
fi
say "arm $label, workload $WORKLOAD, vLLM $version, $(nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader 2>/dev/null | paste -sd ';')"
"$PYTHON" -m lab vllm-tokenizer --model "$MODEL" 2>&1 | tee -a "$log"
left=$((DEADLINE_S - SECONDS))
say "START $folder (deadline in ${left}s)"
ifolder="$study-interference/$slug/chunk-8192"
[ ${#inter_load[@]} -gt 0 ] && extra+=(--interference-decoders "${inter_load[0]}" --interference-long "${inter_load[1]}" \
    --interference-out "$WORK/$ifolder")
timeout -k 30 "$((left + 40))" "$PYTHON" -m lab vllm-load --arm "$label" --model "$MODEL" "${wl[@]}" "${extra[@]}" \
    --span-s "${SPAN_S:-20}" --deadline-s "$((left - 10))" --out "$WORK/$folder" 2>&1 | grep --line-buffered -v '^  waiting for vLLM' | tee -a "$log"
status=${PIPESTATUS[0]}
pgid=$(cat "$WORK/$folder/server.pgid" 2>/dev/null) && kill -9 -- "-$pgid" 2>/dev/null && say "killed the server group $pgid"
rm -f "$WORK/$folder/server.pgid"
say "END $folder: status $status"
[ "$status" -ne 0 ] && tail -n 5 "$WORK/$folder/server.log" 2>/dev/null | tee -a "$log"
# the mix's prompts are rebuilt from the seed (provenance says how); the results and logs travel
[ -d "$WORK/$ifolder" ] || ifolder=
( cd "$WORK" && tar -czf "$OUT/$name.tar.gz" --exclude='*.tmp' --exclude='*.pgid' --exclude='*.raw.json' \
    --exclude='mix.jsonl' --exclude='batch.jobs.json' "$folder" $ifolder )
say "packed $(du -h "$OUT/$name.tar.gz" | cut -f1) into $OUT/$name.tar.gz; total ${SECONDS}s"

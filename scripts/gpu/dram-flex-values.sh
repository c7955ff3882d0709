#!/usr/bin/env bash
# Study: DRAM bytes per prefill kernel (ncu), why vLLM's FlexAttention arm is slow, time against input values.
# Issue 14's GPU measurements in one call (~5 min) on the H200, in this order:
#   1. DRAM bytes of one causal prefill call (ours-tuned, SDPA flash, SDPA cuDNN, Flex) at 4k/16k/32k, from ncu
#      (lab.measure.dram_bytes; needs ncu: $NCU, PATH or /usr/local/cuda/bin/ncu)
#   2. why vLLM's FLEX_ATTENTION arm is slow: Flex default / pad8 / forced / 16x16 tiles / paged block-table
#      mask vs SDPA and a copy; decode 32k (batch 1, 16) and prefill 16k (lab.measure.flex_decomposition)
#   3. time vs input values: bf16 8192^3 matmul and the tuned kernel at 16k on random, zero and small
#      inputs, with SM clock and power (lab.measure.value_dependence)
# Run from the repository root on the GPU box:
#     OUT=/some/folder scripts/gpu_run.sh dram-flex-values
# Optional: PYTHON (default python3), WORK (default /tmp/teaching), DEADLINE_S (default 280: no part runs past
# it; each part has a cap, and every part writes its rows as it goes, so a cut-off part still leaves a dataset).
# What comes back (2 files):
#   $OUT/teaching.tar.gz  dram-bytes/ flex-decomposition/ value-dependence/, each with provenance.json
#   $OUT/teaching.txt     the console; the three tables are printed last
# Commit: tar -xzf teaching.tar.gz -C data/h200/
set -uo pipefail
OUT=${OUT:-/tmp/teaching-out}
WORK=${WORK:-/tmp/teaching}
PYTHON=${PYTHON:-python3}
DEADLINE_S=${DEADLINE_S:-280}
PACK_S=8                      # kept back for packing and printing
export PYTHONUNBUFFERED=1
mkdir -p "$OUT" "$WORK"
log="$OUT/teaching.txt"
: > "$log"
say() { echo "[teaching $(date -u +%T) +${SECONDS}s] $*" | tee -a "$log"; }

say "$(nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,power.limit,memory.used --format=csv,noheader 2>/dev/null)"
say "python: $("$PYTHON" -m lab env --get versions 2>&1 | tail -1)"
NCU_PATH=${NCU:-$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)}
if [ -n "$NCU_PATH" ]; then say "ncu: $NCU_PATH ($("$NCU_PATH" --version 2>/dev/null | tail -1))"
else say "ncu: NOT FOUND (PATH, /usr/local/cuda/bin): part 1 will report it and the other parts still run"; fi

# part NAME CAP RESERVE -- COMMAND...: run with at most CAP seconds, leaving RESERVE seconds for the parts after it
part() {
  local name=$1 cap=$2 reserve=$3; shift 4
  local left=$((DEADLINE_S - PACK_S - reserve - SECONDS))
  [ "$left" -lt "$cap" ] && cap=$left
  if [ "$cap" -lt 20 ]; then say "SKIP $name: only ${cap}s left"; return; fi
  say "START $name (at most ${cap}s)"
  timeout -k 10 "$cap" "$@" 2>&1 | tee -a "$log"
  local status=${PIPESTATUS[0]}
  say "END $name: status $status$([ "$status" = 124 ] && echo ' (cut at its cap: rows written so far are kept)')"
}

part dram-bytes 100 165 -- "$PYTHON" -m lab dram-bytes --out "$WORK/dram-bytes" --deadline-s 90
part flex-decomposition 120 45 -- "$PYTHON" -m lab flex-decomposition --out "$WORK/flex-decomposition"
part value-dependence 60 0 -- "$PYTHON" -m lab value-dependence --out "$WORK/value-dependence"

folders=$(cd "$WORK" && ls -d dram-bytes flex-decomposition value-dependence 2>/dev/null)
if [ -n "$folders" ]; then
  (cd "$WORK" && tar -czf "$OUT/teaching.tar.gz" --exclude='*.tmp' $folders)
  say "packed: $(tar -tzf "$OUT/teaching.tar.gz" | tr '\n' ' ')"
else
  say "nothing to pack"
fi
say "done in ${SECONDS}s"
"$PYTHON" -m lab tables --root "$WORK" \
    dram-bytes/dram_bytes.csv:candidate,n,dram_read_bytes,dram_write_bytes,l2_hit_pct,kernel_ms,kernels \
    flex-decomposition/flex_decomposition.csv:phase,batch,n,variant,ms,gb_per_s,tflops,max_abs_err \
    value-dependence/values.csv:op,inputs,ms,sm_mhz,power_w,clock_limit 2>&1 | tee -a "$log"

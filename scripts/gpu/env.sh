# Shared set-up of the vLLM studies (vllm-sweeps.sh, vllm-traces.sh, vllm-busy-server*.sh, ...); sourced, not run.
# Expects OUT, WORK, PYTHON, TAG (name in log lines) and log (console file under $OUT) to be set.
# Puts the offline vLLM bundle on PYTHONPATH, defines say(), and sets version and study
# (e.g. vllm0.26-qwen2.5-7b), or exits 2 when vLLM is not importable.
VLLM_SITE=${VLLM_SITE:-/tmp/site}
if [ -d "$VLLM_SITE" ]; then export PYTHONPATH="$VLLM_SITE${PYTHONPATH:+:$PYTHONPATH}"; fi
# flashinfer is not in the offline bundle; no telemetry, no hub lookups on a box without network
export VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
mkdir -p "$OUT" "$WORK"
: > "$log"
say() { echo "[$TAG $(date -u +%T) +${SECONDS}s] $*" | tee -a "$log"; }

version=$("$PYTHON" -m lab env --get vllm 2>/dev/null) \
  || { say "vLLM is not importable with $PYTHON (PYTHONPATH=${PYTHONPATH:-}); unpack the bundle into $VLLM_SITE first"; exit 2; }
study="vllm$(echo "$version" | cut -d. -f1,2)-qwen2.5-7b"

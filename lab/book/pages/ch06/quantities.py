"""Chapter 6's quantities (one run of record each) and its runs, each read once: the sweeps' table, the
H200 study, the Flex decomposition and the concurrency points."""

from __future__ import annotations

import functools
import math
from pathlib import Path

from lab.measure.vllm import arms
from lab.results import concurrency as rc
from lab.results import flex_decomposition as flexdec
from lab.results import roofline, value_dependence
from lab.results import sweeps as report
from lab.results.data import DATA_DIR
from lab.results.quantities import Quantity

FA3, FLEX, FA2 = arms.FA3.label, arms.FLEX.label, arms.FA2.label
FLASH = arms.FLASH.label  # the A10G study's FLASH_ATTN, version left to vLLM
A10G_RUN, H200_RUN = report.A10G_STUDY, "h200/vllm0.26-qwen2.5-7b"
CHUNK_RUN, TP_RUN = "h200/vllm0.26-qwen2.5-7b-chunk2048", "h200x2/vllm0.26-qwen2.5-7b-tp2"
H200_CEILINGS = "h200/hardware"   # the H200's matmul rate (its bandwidth ceiling: lab.results.bandwidth)
SHAPE = "lab.results.modelshape: Qwen2.5-7B config.json"
SPECS = "lab.results.hardware"
CAUSAL_N = 16384                  # where the mask study and the race both timed Flex on plain causal attention
FLEX_VARIANTS = ("flex-default", "flex-forced", "flex-tiles16", "flex-paged", "flex-pad8", "sdpa-flash", "sdpa-cudnn")
#: The sweep points whose ITL medians the resolution check reads (the three that agree to the microsecond).
ITL_CHECKS = (("fa2_256", FA2, 256), ("fa2_512", FA2, 512), ("flex_256", FLEX, 256))

# --- the quantities chapter 6 teaches: one family per sweep (members: [arm, ...]) -----------------------------


A10G, H200 = report.SWEEP_QUANTITIES["a10g"], report.SWEEP_QUANTITIES["h200"]
_CHUNK = dict(run=CHUNK_RUN, file=f"{arms.FA3.slug}/sweep.csv")
CHUNK_FIT = {"a": Quantity("h200.chunk2048.fit_a", "the constant a of FA3's fit with prefill chunks of 2,048 tokens",
                           unit="ms", **_CHUNK),
             "b": Quantity("h200.chunk2048.fit_b", "the linear coefficient b of that fit", unit="µs/token", **_CHUNK),
             "c": Quantity("h200.chunk2048.fit_c", "the quadratic coefficient c of that fit", unit="ps/token²",
                           **_CHUNK)}
CHUNK_SIZE = Quantity("h200.chunk2048.chunk", "the prefill chunk (max_num_batched_tokens) of the chunk-size sweep's "
                      "server", run=CHUNK_RUN, file=f"{arms.FA3.slug}/provenance.json", unit="tokens")
CHUNK_RATIO = Quantity("h200.chunk2048.ratio", "a coefficient with chunks of 2,048 tokens over the same with the main "
                       "sweep's chunks", unit="×", **_CHUNK)
CHUNK_ADDED = Quantity("h200.chunk2048.c_added", "the quadratic time the small chunks add at a prompt length: "
                       "(c_small - c_large) n²", unit="ms", **_CHUNK)
CHUNK_REREAD = Quantity("h200.chunk2048.reread", "the cached prefix read once more per chunk (compulsory K/V bytes, "
                        "lab.results.iomodel.chunked_prefill_bytes) at the H200's bandwidth ceiling: small chunks "
                        "minus large", unit="ms", **_CHUNK)
CHUNK_REREAD_SHARE = Quantity("h200.chunk2048.reread_share", "that re-read time over the quadratic time the small "
                              "chunks added", unit="%", **_CHUNK)
_TP = dict(run=TP_RUN, file=f"{arms.FA3.slug}/sweep.csv")
TP_TTFT_RATIO = Quantity("h200x2.tp.ttft_ratio", "TTFT on one H200 over TTFT split over two (FA3)", unit="×", **_TP)
TP_ITL = Quantity("h200x2.tp.itl", "a decode step's ITL on one H200 or split over two (FA3)", unit="ms", **_TP)
TP_GAP = Quantity("h200x2.tp.over_floor_ms", "a decode step's ITL minus its own floor, on one or two H200s", unit="ms",
                  **_TP)
TP_OVERHEAD = Quantity("h200x2.tp.overhead", "the two-GPU step's time above its floor minus the one-GPU step's",
                       unit="ms", **_TP)
TP_LENGTH = Quantity("h200x2.tp.length", "a prompt length both the one- and two-GPU sweeps ran", unit="tokens", **_TP)
TP_WINDOW = Quantity("h200x2.tp.window_ms", "GPU time of a kernel family in one 8,192-token prefill window of one of "
                     "the two GPUs (census)", run=TP_RUN, file=f"traces/{arms.FA3.slug}/census.csv", unit="ms")
TP_COMM_PCT = Quantity("h200x2.tp.comm_pct", "NCCL's share of that window", run=TP_RUN,
                       file=f"traces/{arms.FA3.slug}/census.csv", unit="%")
TP_COMM_LAUNCHES = Quantity("h200x2.tp.comm_launches", "collective kernels launched in that window", run=TP_RUN,
                            file=f"traces/{arms.FA3.slug}/census.csv", unit="kernels")
ONE_WINDOW = Quantity("h200.census.prefill_window_ms", "GPU time of a kernel family in one 8,192-token prefill window "
                      "on one H200 (census)", run=H200_RUN, file=f"traces/{arms.FA3.slug}/census.csv", unit="ms")
_TRACES = dict(run=H200_RUN, file=f"traces/{arms.FLEX.slug}")
VLLM_TOKENS = Quantity("h200.vllm_flex.window_tokens", "the context of the profiler windows the Flex section reads",
                       unit="tokens", **_TRACES)
VLLM_STEP_MS = Quantity("h200.vllm_flex.decode_attention_ms", "attention's GPU time per decode step in vLLM's FLEX "
                        "arm's decode window", unit="ms", **_TRACES)
VLLM_PREFILL_TFLOPS = Quantity("h200.vllm.prefill_attention_tflops", "causal attention FLOPs of the window's prompt "
                               "over attention's GPU time in its prefill window", unit="TFLOP/s", run=H200_RUN,
                               file="traces/<arm>")
VLLM_KERNEL_MS = Quantity("h200.vllm_flex.kernel_ms", "one call of vLLM's Flex attention kernel in the decode window",
                          unit="ms", **_TRACES)
VLLM_PROGRAMS = Quantity("h200.vllm_flex.programs", "programs in the grid of vLLM's Flex kernel", unit="programs",
                         **_TRACES)
VLLM_ROWS = Quantity("h200.vllm_flex.prefill_rows", "query rows per program of vLLM's Flex prefill kernel: the chunk "
                     "over the grid's query tiles", unit="rows", **_TRACES)
_DEC = dict(run=flexdec.DATASET, file=flexdec.FILE)
DEC_LENGTH = Quantity("h200.flex_decomposition.length", "the context (decode) or prompt (prefill) of the Flex "
                      "decomposition", unit="tokens", **_DEC)
DEC_GBS = Quantity("h200.flex_decomposition.kv_rate", "K/V bytes of one decode call over its time", unit="GB/s", **_DEC)
DEC_PCT = Quantity("h200.flex_decomposition.pct_of_ceiling", "that rate over the H200's read-stream ceiling", unit="%",
                   **_DEC)
DEC_MS = Quantity("h200.flex_decomposition.ms", "one call of a variant, median of interleaved rounds", unit="ms", **_DEC)
DEC_PROGRAMS = Quantity("h200.flex_decomposition.programs", "programs in the grid of a variant's attention kernel",
                        unit="programs", **_DEC)
DEC_EXTRA = Quantity("h200.flex_decomposition.extra_kernels", "kernels a variant launches besides its attention "
                     "kernel (the decoding template's merges)", unit="kernels", **_DEC)
DEC_TFLOPS = Quantity("h200.flex_decomposition.tflops", "causal FLOPs of one prefill call over its time",
                      unit="TFLOP/s", **_DEC)
DEC_ROWS = Quantity("h200.flex_decomposition.rows", "query rows per program of a variant's prefill kernel",
                    unit="rows", **_DEC)
DEC_VLLM = Quantity("h200.flex_decomposition.vllm_over_paged", "vLLM's FLEX arm's K/V read rate (trace) over the "
                    "standalone flex-paged call's", unit="×", **_DEC)
VALUES_PCT = Quantity("h200.value_dependence.largest_change", "the largest change of an op's time against random "
                      "inputs, over the input kinds", run=value_dependence.DATASET, file=value_dependence.FILE, unit="%")
KV_BOUND = Quantity("qwen2.5-7b.kv_bound_batch", "the fewest sequences of one context whose KV bytes in a decode "
                    "step exceed the weight bytes the step streams: decode is KV-bound from that batch on",
                    run="lab.results.concurrency: Qwen2.5-7B's shape", unit="sequences")
B_AT_MATMUL_RATE = Quantity("h200.sweep.b_at_matmul_rate", "the matmul FLOPs of one Qwen2.5-7B token at the "
                            "H200's measured matmul rate: the least b can be at that rate", run=roofline.MATMUL_RUN,
                            file="measurements.json", unit="µs/token")
WEIGHTS_FLOOR = Quantity("h200.decode.weights_floor", "the weights one decode step streams (every layer's matmuls and "
                         "the LM head), split over that many GPUs, at the H200's bandwidth ceiling", run="h200/bandwidth",
                         file="read_stream.csv", unit="ms")
ITL_RES = Quantity("h200.sweep.itl_median_resolution", "how finely a sweep point's pooled ITL median is known: its "
                   "gaps, tokens per streamed chunk, the step the chunk times are recorded to (µs), the median's "
                   "bootstrap 95% half-width (µs)", run=H200_RUN, file="<arm>/measurements.jsonl")


# --- the runs, each read once ------------------------------------------------------------------------------

@functools.cache
def sweep_table():
    return report.sweep_table()


@functools.cache
def h200_study() -> str:
    return report.find_study(sweep_table(), "H200")


@functools.cache
def decomposition(root: Path = DATA_DIR):
    return flexdec.read(root)


@functools.cache
def concurrency_points():
    bandwidth, _ = rc.floor_bandwidth()
    return rc.with_floor(rc.load_points(), bandwidth)


def kv_bound_batch(context: int) -> int:
    """The first whole batch whose KV bytes exceed the weights' at ``context`` (:data:`KV_BOUND`): the one
    definition the book uses (lab.results.concurrency.kv_bound_batch gives the fractional batch of equality)."""
    return math.floor(rc.kv_bound_batch(context)) + 1


def fit(table, study: str):
    return report.fit_summary(table, study).set_index("arm")

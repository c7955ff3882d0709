"""Where fused prefill attention sits: the two byte counts held against what was measured.

The tile re-read count (every K/V tile charged to HBM once per query tile and query head) is an
upper estimate of a fused kernel's bytes. If it were the truth, no kernel could finish faster than
``reread bytes / bandwidth``. Two measurements in this repository finish faster than that:

- the H200 kernel benchmark (``data/h200/kernels``): the best prefill kernels at long prompts run in
  less time than the re-read count needs at the GPU's bandwidth ceiling (:mod:`lab.results.bandwidth`),
  and within a short step of the matmul rate measured on it (``data/h200/hardware``);
- the published A10G study: the quadratic coefficient fitted to vLLM's time-to-first-token is
  smaller than the re-read count's floor for it at the A10G's bandwidth ceiling, and close to the compute
  floor.

On the H200 that margin is thin: the check passes at the GPU's bandwidth ceiling (its read stream) and
fails at the datasheet's, so a stopwatch is a sanity check there, not a proof; the DRAM bytes Nsight Compute
counts (:mod:`lab.results.dram_bytes`) are what show the traffic near the compulsory count.
"""

from __future__ import annotations

from pathlib import Path

from lab import LabError
from lab.results import data, hardware, iomodel, kernel_runs, reference
from lab.results.bandwidth import ceiling
from lab.results.hardware import DEVICES, DTYPE_BYTES

#: Where the H200's measured matmul rate is (its bandwidth ceiling is lab.results.bandwidth's).
H200_CEILINGS = "h200/hardware"


def h200_kernel_check(candidate: str, n: int, root: Path | None = None) -> dict:
    """One benchmarked prefill kernel on the H200 against the bounds the two counts set.

    Returns ms (measured), flops_per_s (achieved), and the least time each bound allows at the
    *measured* rates: reread_ms (re-read bytes / bandwidth ceiling), compulsory_ms (compulsory bytes /
    bandwidth ceiling), compute_ms (FLOPs / matmul rate); plus the rates used, the byte counts, and
    reread_ms_datasheet (re-read bytes at the datasheet bandwidth, where the check's verdict can flip).
    """
    root = root or data.DATA_DIR
    ceilings = hardware.load_measurement(root / H200_CEILINGS)
    if ceilings is None:
        raise LabError(f"data/{H200_CEILINGS}: the H200 ceiling measurement is missing")
    runs = kernel_runs.stored_runs(kernel_runs.RECORD, root)
    table = runs["bench run"].csv("prefill.csv", ("candidate", "n", "batch", "q_heads", "kv_heads", "head_dim",
                                                 "causal", "status", "ms"))
    hit = table[(table.candidate == candidate) & (table.n == n) & (table.status == "ok")]
    if hit.empty:
        raise LabError(f"data/{kernel_runs.RECORD}/prefill.csv: no timed row for {candidate} at n={n}")
    row = hit.iloc[0]
    block = iomodel.flash_block_size(int(row.head_dim), DEVICES["H200-SXM"].smem_per_sm, DTYPE_BYTES["bf16"])
    counts = iomodel.prefill_byte_counts(n, int(row.q_heads), int(row.kv_heads), int(row.head_dim), block,
                                         DTYPE_BYTES["bf16"], bool(row.causal), int(row.batch))
    ms, bandwidth = float(row.ms), ceiling("H200-SXM", root)
    return {"candidate": candidate, "n": n, "ms": ms, "flops": counts["flops"],
            "flops_per_s": counts["flops"] / (ms * 1e-3),
            "reread_bytes": counts["reread"], "compulsory_bytes": counts["compulsory"],
            "reread_ms": 1e3 * counts["reread"] / bandwidth,
            "compulsory_ms": 1e3 * counts["compulsory"] / bandwidth,
            "compute_ms": 1e3 * counts["flops"] / ceilings.peak_flops,
            "reread_ms_datasheet": 1e3 * counts["reread"] / DEVICES["H200-SXM"].bandwidth,
            "bandwidth": bandwidth, "peak_flops": ceilings.peak_flops, "block": block}


def quadratic_floors(shape, dev, n: int = 32768) -> dict:
    """Floors on the quadratic coefficient c of a TTFT fit t = a + b·n + c·n² (seconds per token²).

    ``reread``: the re-read count's bytes per token² (whole model) at the device's bandwidth ceiling;
    ``compute``: causal attention's FLOPs per token² (2·d·H·L) at its peak FLOP/s. The byte count per
    token² is taken at length ``n``, where it has settled to its long-prompt value.
    """
    block = iomodel.flash_block_size(shape.head_dim, dev.smem_per_sm, DTYPE_BYTES["bf16"])
    counts = iomodel.prefill_byte_counts(n, shape.q_heads, shape.kv_heads, shape.head_dim, block)
    reread_per_token2 = shape.layers * counts["reread"] / n**2
    compute_per_token2 = 2 * shape.head_dim * shape.q_heads * shape.layers
    return {"reread": reread_per_token2 / ceiling(dev), "compute": compute_per_token2 / dev.peak_flops("bf16"),
            "block": block}


def a10g_fit_check(shape) -> dict:
    """The A10G study's fitted c for each backend beside the re-read and compute floors (s/token²)."""
    fits = data.load(reference.DATASET).csv("fits.csv", ("arm", "c_ps_per_token2")).set_index("arm")
    floors = quadratic_floors(shape, DEVICES["A10G"])
    return {"fitted": {arm: float(c) * 1e-12 for arm, c in fits["c_ps_per_token2"].items()}, **floors}


def fastest_candidate(n: int, root: Path | None = None) -> str:
    """The benchmarked prefill kernel with the lowest median time at length n (H200 run of record)."""
    runs = kernel_runs.stored_runs(kernel_runs.RECORD, root or data.DATA_DIR)
    table = runs["bench run"].csv("prefill.csv", ("candidate", "n", "status", "ms"))
    ok = table[(table.n == n) & (table.status == "ok")]
    if ok.empty:
        raise LabError(f"data/{kernel_runs.RECORD}/prefill.csv: no timed row at n={n}")
    return str(ok.loc[ok.ms.idxmin(), "candidate"])

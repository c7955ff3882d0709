"""The attention backward pass as measured: the race (data/h200/backward-race) and its counters
(data/h200/backward-counters), and what storing P instead of recomputing it would take.

* :func:`race` -- every timed row of a backward race (``python -m lab backward-race``): forward, forward +
  backward and backward milliseconds, backward/forward, TFLOP/s (2.5 x the forward's matrix FLOPs, causal
  halved, as every candidate is credited), and each row's speed against SDPA's flash backend and cuDNN
  (their backward time over the row's). :func:`unavailable` says which candidates did not run, and why.
* :func:`kernels` -- Nsight Compute's counters of each kernel a backward job launched: time, tensor-pipe
  busy share, warps per SM, registers, DRAM bytes read and written.
* :func:`stored_p` -- the IO argument at one length: the bytes P would take (written by the forward, read back
  by the backward), and the least bytes a backward moves either way (:func:`lab.results.iomodel.backward_hbm_bytes`).
* :func:`training_memory` -- what keeping P for the backward would hold, per head and per layer and over a model,
  against the log-sum-exp FlashAttention keeps.

Values only: no sentences. A run not on file reads as an empty table.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pandas as pd

from lab import LabError, positive_int
from lab.measure import ncu_output
from lab.results import data, iomodel
from lab.results.modelshape import ModelShape

RACE_RUN = "h200/backward-race"
COUNTERS_RUN = "h200/backward-counters"
#: The peers a row's speed is given against: SDPA's flash backend (FlashAttention 2) and cuDNN.
PEERS = ("sdpa-flash", "sdpa-cudnn")
#: The race's shape (its provenance says the same; kept here for the IO and memory arithmetic).
Q_HEADS, KV_HEADS, HEAD_DIM = 28, 4, 128
_METRICS = {"ms": "gpu__time_duration.sum",
            "tensor_pct": "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
            "warps_per_sm": "sm__warps_active.avg.per_cycle_active",
            "registers": "launch__registers_per_thread",
            "dram_read": "dram__bytes_read.sum", "dram_write": "dram__bytes_write.sum"}


def _folder(run: str, root: Path | None):
    return (root / run) if root is not None else run


def race(run: str = RACE_RUN, root: Path | None = None) -> pd.DataFrame:
    """The timed rows (status ok) of a backward race, with ``vs_<peer>`` = the peer's backward ms over the row's
    at the same length (above 1: the row is faster); empty when the run is not on file."""
    try:
        table = data.load(_folder(run, root)).csv("race.csv", ("candidate", "n", "status", "fwd_ms", "fwdbwd_ms",
                                                               "bwd_ms", "bwd_over_fwd", "tflops_bwd"))
    except LabError:
        return pd.DataFrame(columns=["candidate", "n", "fwd_ms", "fwdbwd_ms", "bwd_ms", "bwd_over_fwd", "tflops_bwd"])
    ok = table[table.status == "ok"].copy()
    ok["n"] = ok.n.astype(int)
    for peer in PEERS:
        times = ok[ok.candidate == peer].set_index("n").bwd_ms
        ok[f"vs_{peer}"] = ok.n.map(times) / ok.bwd_ms
    return ok.reset_index(drop=True)


def launch(config: str) -> dict[str, dict[str, int]]:
    """A race row's ``config`` ('dkdv BLOCK_M=16 BLOCK_N=64 ...; dq BLOCK_M=128 ...') as
    {kernel: {setting: value}}: the launches the autotuner picked for our two kernels."""
    kernels = {}
    for part in filter(None, (p.strip() for p in str(config).split(";"))):
        name, *settings = part.split()
        kernels[name] = {key: int(value) for key, value in (s.split("=") for s in settings)}
    return kernels


def unavailable(run: str = RACE_RUN, root: Path | None = None) -> dict[str, str]:
    """Candidates of a race that never ran -> the race's note on why (FA4 where its wheel is not installed)."""
    try:
        table = data.load(_folder(run, root)).csv("race.csv", ("candidate", "status", "note"))
    except LabError:
        return {}
    ran = set(table[table.status == "ok"].candidate)
    return {str(r.candidate): str(r.note) for r in table.drop_duplicates("candidate").itertuples()
            if r.candidate not in ran}


def row(table: pd.DataFrame, candidate: str, n: int) -> pd.Series:
    """One candidate's row at one length; a LabError naming both when the race has none."""
    found = table[(table.candidate == candidate) & (table.n == n)]
    if found.empty:
        raise LabError(f"the backward race has no timed row of {candidate} at {n} tokens")
    return found.iloc[0]


@functools.cache
def _counter_rows(run: str, root: Path | None) -> tuple[dict, ...]:
    dataset = data.load(_folder(run, root))
    return tuple(ncu_output.read_dataset(dataset.file("raw.csv").read_text(), dataset.file("child.log").read_text()))


def kernels(run: str = COUNTERS_RUN, root: Path | None = None) -> pd.DataFrame:
    """One row per kernel of every profiled backward job: candidate, n, kernel index and name, ``ms``,
    ``tensor_pct``, ``warps_per_sm``, ``registers``, ``dram_read``, ``dram_write`` (bytes), and ``main`` (the
    job's longest kernel)."""
    by_kernel: dict[tuple, dict] = {}
    for r in _counter_rows(run, root):
        entry = by_kernel.setdefault((r["job"], r["kernel_index"]), {
            "candidate": r["candidate"], "n": int(r["n"]), "index": int(r["kernel_index"]), "kernel": r["kernel"]})
        entry[r["metric"]] = r["value"]
    rows = [{**{k: e[k] for k in ("candidate", "n", "index", "kernel")},
             **{name: e.get(metric) for name, metric in _METRICS.items()}} for e in by_kernel.values()]
    table = pd.DataFrame(rows)
    table["ms"] = table.ms * 1e3
    table["main"] = table.ms == table.groupby(["candidate", "n"]).ms.transform("max")
    return table


def job_totals(table: pd.DataFrame) -> pd.DataFrame:
    """Per (candidate, n): kernels launched, their summed ms and DRAM bytes read and written."""
    return table.groupby(["candidate", "n"], as_index=False).agg(
        kernels=("kernel", "size"), ms=("ms", "sum"), dram_read=("dram_read", "sum"), dram_write=("dram_write", "sum"))


def stored_p(n: int, q_heads: int = Q_HEADS, kv_heads: int = KV_HEADS, head_dim: int = HEAD_DIM,
             bytes_per_element: int = 2) -> dict:
    """The IO argument for one causal layer at ``n`` tokens, batch 1: ``p_bytes`` (P's kept pairs, every query
    head), ``p_traffic`` (P written by the forward and read back by the backward), ``recompute`` (the least a
    backward moves when it rebuilds P) and ``stored`` (the same plus reading P), in bytes; ``recompute_flops``:
    the one extra product (S = Q Kᵀ) rebuilding P costs, causal halved as the FLOP count halves it."""
    counts = iomodel.backward_hbm_bytes(n, n, q_heads, kv_heads, head_dim, True, 1, bytes_per_element)
    pairs = iomodel.kept_pairs(n, n, True)
    return {"p_bytes": counts["p_bytes"], "p_traffic": 2 * counts["p_bytes"], "recompute": counts["recompute"],
            "stored": counts["stored_p"], "recompute_flops": 2 * head_dim * pairs * q_heads}


def recompute_intensity(head_dim: int = HEAD_DIM, bytes_per_element: int = 2) -> float:
    """FLOPs of rebuilding one score (2·d for its dot product) per byte that storing its probability would move
    (written once, read once): above the ridge, storing wins; below it, recomputing does."""
    return 2 * positive_int("head_dim", head_dim) / (2 * positive_int("bytes_per_element", bytes_per_element))


def training_memory(n: int, shape: ModelShape, batch: int = 1) -> dict:
    """Bytes kept from the forward to the backward for the attention probabilities at ``n`` tokens of causal
    attention: ``p_bf16`` and ``p_fp32`` (P's causal half, the pairs the mask keeps, the least a causal backward
    that stores P must keep: the same count :func:`stored_p` moves), ``lse`` (one fp32 per query row, what
    FlashAttention keeps instead), each ``per_head_layer`` and over the model (``model``: every layer and query
    head, times ``batch``)."""
    n, batch = positive_int("n", n), positive_int("batch", batch)
    pairs = iomodel.kept_pairs(n, n, True)
    per = {"p_bf16": 2 * pairs, "p_fp32": 4 * pairs, "lse": 4 * n}
    heads = shape.layers * shape.q_heads * batch
    return {"per_head_layer": per, "model": {key: value * heads for key, value in per.items()}}

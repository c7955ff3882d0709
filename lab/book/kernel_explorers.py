"""Explorers over the kernel benchmarks (``python -m lab bench``): prefill and decode, every candidate.

They read every dataset of kind ``kernels`` (the committed H200 run in data/h200/kernels and any
run of the reader's own under data/local/kernels), so a reader's GPU appears as another choice.
"""

from __future__ import annotations

import functools
import math

from lab import LabError
from lab.measure.bench import ALL_CANDIDATES, CANDIDATES
from lab.names import colour, label
from lab.results.data import datasets, skipped_note
from lab.results.kernel_runs import RACE, with_ceiling_share
from lab.book.explorer import Chart, Control, Explorer, Marker, Readout, Series, View

@functools.cache
def kernel_runs() -> dict:
    """name -> (dataset, prefill table or None, decode table or None): the race of record first (the explorer's
    default), then the other committed H200 runs, then a reader's own."""
    runs = {}
    for ds in sorted(datasets(kind="kernels"), key=lambda d: (d.name != RACE, not d.name.startswith("h200/"), d.name)):
        prefill = ds.csv("prefill.csv", ("candidate", "n", "status", "ms", "tflops")) if ds.has("prefill.csv") else None
        decode = with_ceiling_share(ds.csv("decode.csv", ("candidate", "batch", "n", "status", "ms", "gbps")), ds.gpu) \
            if ds.has("decode.csv") else None
        if prefill is not None or decode is not None:
            runs[ds.name] = (ds, prefill, decode)
    if not runs:
        raise LabError("no kernel benchmark data under data/; run `python -m lab bench` on a GPU (or restore data/h200/kernels)")
    return runs


def _source(ds) -> str:
    p = ds.provenance
    return f"{p['gpu']}, torch {p['torch']}, Triton {p['triton']}, bf16; data/{ds.name}"


def _run_control(phase: str) -> Control:
    names = [name for name, (_, prefill, decode) in kernel_runs().items()
             if (prefill if phase == "prefill" else decode) is not None]
    return Control("run", "Benchmark run", values=names,
                   labels=[f"{kernel_runs()[n][0].gpu} ({n})" for n in names])


def _row(table, candidate: str, **where):
    sel = table[table.candidate == candidate]
    for key, value in where.items():
        sel = sel[sel[key] == value]
    return sel.iloc[0] if len(sel) else None


def _why_not(row) -> str:
    if row is None:
        return "not measured in this run"
    note = row.get("note")
    return f"{row['status']}: {note}" if isinstance(note, str) and note else str(row["status"])


def prefill_missing(run: str, length: int, backend: str) -> str:
    """Why a run has no prefill time for this kernel and length ("" when it has one)."""
    row = _row(kernel_runs()[run][1], backend, n=length)
    if row is not None and row["status"] == "ok":
        return ""
    return f"{label(backend)} at {length:,} tokens in {run}: {_why_not(row)}"


def prefill_view(run: str, length: int, backend: str) -> View:
    ds, table, _ = kernel_runs()[run]
    series = []
    for name in ALL_CANDIDATES:
        rows = table[(table.candidate == name) & (table.status == "ok")].sort_values("n")
        if len(rows):
            series.append(Series(label(name), list(rows.n), list(rows.tflops), kind="line+points",
                                 color=colour(name)))
    row = _row(table, backend, n=length)
    ok = row is not None and row["status"] == "ok"
    fastest = table[(table.n == length) & (table.status == "ok")]
    best = fastest.loc[fastest.ms.idxmin()] if len(fastest) else None
    readouts = [
        Readout("ms", "time", row["ms"] if ok else None, "ms", ".3f"),
        Readout("tflops", "throughput (causal = half the FLOPs)", row["tflops"] if ok else None, "TFLOP/s", ".0f"),
        # the label is the same for every choice (the static page needs that); the fastest is named in the note
        Readout("vs_fastest", "speed vs the fastest at this length",
                best["ms"] / row["ms"] if ok and best is not None else None, "×", ".2f"),
        Readout("err", "max abs error vs fp32 reference", row["max_abs_err"] if row is not None else None, "", ".1e"),
    ]
    return View(readouts=readouts,
                chart=Chart("prompt length (tokens)", "TFLOP/s", series=series, log_x=True,
                            x_ticks=sorted(set(table.n)),
                            marker=Marker(length, row["tflops"] if ok else math.nan, label(backend)),
                            source=_source(ds)),
                note=(f"fastest at {length:,} tokens: {label(best.candidate)}" if ok and best is not None
                      else f"{label(backend)} at {length:,} tokens: {_why_not(row)}"))


def decode_view(run: str, context: int, batch: int, backend: str) -> View:
    ds, _, table = kernel_runs()[run]
    at_batch = table[table.batch == batch]
    series = []
    for name in CANDIDATES:
        rows = at_batch[(at_batch.candidate == name) & (at_batch.status == "ok")].sort_values("n")
        if len(rows):
            series.append(Series(label(name), list(rows.n), list(rows.pct_of_ceiling), kind="line+points",
                                 color=colour(name)))
    row = _row(table, backend, n=context, batch=batch)
    ok = row is not None and row["status"] == "ok"
    eager = row.get("ms_eager") if row is not None else None
    readouts = [
        Readout("ms", "one layer's decode attention (graph replay)", row["ms"] if ok else None, "ms", ".4f"),
        Readout("ms_eager", "launched from Python instead", eager if ok else None, "ms", ".4f"),
        Readout("gbps", "K/V read rate", row["gbps"] if ok else None, "GB/s", ",.0f"),
        Readout("frac", "of the GPU's bandwidth ceiling (a read-only stream)", row["pct_of_ceiling"] if ok else None,
                "%", ".0f"),
    ]
    return View(readouts=readouts,
                chart=Chart("cached context (tokens)", "% of bandwidth ceiling", series=series, log_x=True,
                            x_ticks=sorted(set(table.n)),
                            marker=Marker(context, row["pct_of_ceiling"] if ok else math.nan, label(backend)),
                            source=_source(ds)),
                note="" if ok else f"{label(backend)}, batch {batch}, {context:,} tokens: {_why_not(row)}")


def prefill_explorer() -> Explorer:
    """Prompt length x candidate -> time, TFLOP/s, speed vs the fastest, error."""
    first = next(iter(kernel_runs().values()))[1]
    lengths = sorted(int(n) for n in first.n.unique())
    return Explorer(
        key="kernels-prefill", title="Causal GQA prefill attention (28 query heads over 4 KV heads, d=128, bf16)",
        controls=[_run_control("prefill"),
                  Control("length", "Prompt length (tokens)", values=lengths, default=max(lengths)),
                  Control("backend", "Kernel", values=list(ALL_CANDIDATES), default="ours-tuned",
                          labels=[label(c) for c in ALL_CANDIDATES])],
        view=prefill_view, why_missing=prefill_missing, skipped=skipped_note(holding="prefill.csv"),
        caption="Every candidate timed in one run (median of CUDA-event timings, L2 flushed) after its output "
                "was checked against an fp32 reference.")


def decode_explorer() -> Explorer:
    """Context x batch x candidate -> time, bandwidth, share of the GPU's bandwidth ceiling."""
    first = next(run for run in kernel_runs().values() if run[2] is not None)[2]
    contexts = sorted(int(n) for n in first.n.unique())
    batches = sorted(int(b) for b in first.batch.unique())
    return Explorer(
        key="kernels-decode", title="Decode attention: one new token over a KV cache (28/4 heads, d=128, bf16)",
        controls=[_run_control("decode"),
                  Control("context", "Cached context (tokens)", values=contexts, default=32768),
                  Control("batch", "Batch (sequences)", values=batches, default=batches[0]),
                  Control("backend", "Kernel", values=list(CANDIDATES), default="ours-tuned",
                          labels=[label(c) for c in CANDIDATES])],
        view=decode_view, skipped=skipped_note(holding="decode.csv"),
        caption="Time per decode step replayed from a CUDA graph, inputs rotated so K/V come from HBM; the "
                "bandwidth counts K and V read once, against the GPU's read-stream ceiling (the appendix's).")

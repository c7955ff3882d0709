"""The backward race's explorer: length x kernel -> backward time, forward time, backward/forward, TFLOP/s and the
speed against SDPA's flash backend and cuDNN.

It reads every backward race on file (the committed H200 run, and a reader's own under data/local/, which
``python -m lab backward-race`` or chapter 4b's run panel writes), so a reader's GPU appears as another run.
"""

from __future__ import annotations

import functools

from lab import LabError
from lab.book.explorer import Chart, Control, Explorer, Marker, Readout, Series, View
from lab.names import colour, label
from lab.results import backward
from lab.results.data import datasets, skipped_note

@functools.cache
def race_runs() -> dict:
    """Run name -> (dataset, timed rows): the committed H200 race first (the default), then any other."""
    found = [ds for ds in datasets(kind="kernels") if ds.has("race.csv")]
    runs = {}
    for ds in sorted(found, key=lambda d: (d.name != backward.RACE_RUN, d.name)):
        table = backward.race(ds.path.as_posix())
        if len(table):
            runs[ds.name] = (ds, table)
    if not runs:
        raise LabError(f"no backward race under data/; run `python -m lab backward-race` on a GPU (or restore "
                       f"data/{backward.RACE_RUN})")
    return runs


def _candidates() -> list[str]:
    """Every kernel some run timed, in the order the races ran them."""
    return list(dict.fromkeys(c for _, table in race_runs().values() for c in table.candidate))


def _lengths() -> list[int]:
    return sorted({int(n) for _, table in race_runs().values() for n in table.n})


def _source(ds) -> str:
    p = ds.provenance
    return f"{p['gpu']}, torch {p['torch']}, Triton {p['triton']}, bf16, causal GQA 28/4, d=128; data/{ds.name}"


def backward_missing(run: str, length: int, kernel: str) -> str:
    """Why a run has no backward time for this kernel and length ("" when it has one)."""
    table = race_runs()[run][1]
    if len(table[(table.candidate == kernel) & (table.n == length)]):
        return ""
    return f"{label(kernel)} at {length:,} tokens: not timed in {run}"


def backward_view(run: str, length: int, kernel: str) -> View:
    ds, table = race_runs()[run]
    series = []
    for name in dict.fromkeys(table.candidate):
        rows = table[table.candidate == name].sort_values("n")
        if len(rows):
            series.append(Series(label(name), list(rows.n), list(rows.tflops_bwd), kind="line+points",
                                 color=colour(name)))
    r = backward.row(table, kernel, length)
    readouts = [
        Readout("bwd_ms", "backward (forward + backward − forward)", r.bwd_ms, "ms", ".2f"),
        Readout("fwd_ms", "forward alone", r.fwd_ms, "ms", ".2f"),
        Readout("ratio", "backward / forward", r.bwd_over_fwd, "×", ".2f"),
        Readout("tflops", "backward TFLOP/s (2.5 × the forward's matrix FLOPs)", r.tflops_bwd, "TFLOP/s", ".0f"),
        Readout("vs_flash", "speed vs SDPA flash (its backward ms / this one's)", r.get("vs_sdpa-flash"), "×", ".2f",
                missing="SDPA flash not timed at this length"),
        Readout("vs_cudnn", "speed vs cuDNN (its backward ms / this one's)", r.get("vs_sdpa-cudnn"), "×", ".2f",
                missing="cuDNN not timed at this length"),
    ]
    return View(readouts=readouts,
                chart=Chart("sequence length (tokens)", "backward TFLOP/s", series=series, log_x=True,
                            x_ticks=sorted(set(table.n)), marker=Marker(length, r.tflops_bwd, label(kernel)),
                            source=_source(ds)))


def backward_explorer() -> Explorer:
    """Sequence length x kernel -> backward and forward time, their ratio, TFLOP/s, speed vs the two peers."""
    names = list(race_runs())
    lengths, candidates = _lengths(), _candidates()
    return Explorer(
        key="backward-race", title="Attention backward, causal GQA (28 query heads over 4 KV heads, d=128, bf16)",
        controls=[Control("run", "Race", values=names, labels=[f"{race_runs()[n][0].gpu} ({n})" for n in names]),
                  Control("length", "Sequence length (tokens)", values=lengths, default=16384 if 16384 in lengths
                          else lengths[-1]),
                  Control("kernel", "Kernel", values=candidates, default="ours" if "ours" in candidates
                          else candidates[0], labels=[label(c) for c in candidates])],
        view=backward_view, why_missing=backward_missing, skipped=skipped_note(holding="race.csv"),
        caption="One process, interleaved rounds (do_bench medians, L2 flushed): the forward alone and forward + "
                "backward back to back; every kernel's gradients checked against fp32 autograd first.")

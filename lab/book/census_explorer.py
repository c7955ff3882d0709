"""Chapter 7's explorer: phase x prompt length x backend x GPU -> GPU time by kernel family."""

from __future__ import annotations

from pathlib import Path

from lab.book.explorer import Chart, Control, Explorer, Marker, Readout, Series, View
from lab.measure.census import FAMILIES
from lab.results.census_windows import (EXPLORED_BACKENDS, LENGTHS, PHASE_LABELS, PHASES, census_table, gpus, nearest_window,
                                        window)
from lab.results.data import DATA_DIR, skipped_note

def _note(w, substituted: bool, phase: str, length: int, gpu: str) -> str:
    """What the view shows: missing, derived or substituted figures, in one line."""
    if not w.known:
        return (f"{gpu} {PHASE_LABELS[phase]} at {length} tokens: not captured yet" if gpu != "A10G"
                else f"the reference study published no census for its {PHASE_LABELS[phase]} at {length} tokens")
    parts = []
    if substituted:
        parts.append(f"{gpu} has no {PHASE_LABELS[phase]} at {length} tokens"
                     + (" (the study's traces were not released)" if gpu == "A10G" else "")
                     + f"; shown instead: its {PHASE_LABELS[w.phase]} at {w.tokens} tokens")
    if w.derived:
        parts.append("derived: " + ", ".join(w.derived))
    missing = [f for f in FAMILIES if w.ms[f] is None]
    if missing:
        parts.append("not published: " + ", ".join(missing))
    return "; ".join(parts)


def census_explorer(root: Path = DATA_DIR):
    """Phase x length x backend x GPU -> the window's attention / matmul / other time and shares."""
    table = census_table(root)
    gpu_values = gpus(table)

    def why_missing(phase, length, backend, gpu):
        # a GPU with no window of this backend at all (the two-GPU server was profiled with FA3 only)
        if not nearest_window(table, gpu, phase, length, backend)[0].known:
            return f"no {backend} window was captured on {gpu}"
        return ""

    def view(phase, length, backend, gpu):
        w, substituted = nearest_window(table, gpu, phase, length, backend)
        absent = "not published" if w.source == "published" else "not captured"  # said where a figure is missing
        readouts = [Readout("window", "GPU kernel time in the window", w.window_ms, unit="ms", fmt=",.1f",
                            missing=absent)]
        for fam in FAMILIES:
            readouts.append(Readout(fam, f"{fam} kernels", w.ms[fam], unit="ms", fmt=",.1f", missing=absent))
        readouts.append(Readout("attn_share", "attention share of the window", w.share("attention"), unit="%",
                                fmt=".1f", missing=absent))
        series = []
        for fam in FAMILIES:
            xs, ys = [], []
            for n in LENGTHS:
                value = window(table, gpu, w.phase, n, backend).ms[fam]
                if value is not None:
                    xs.append(n)
                    ys.append(value)
            if any(ys):         # a family with no time at any length (communication on one GPU) draws no line
                series.append(Series(fam, xs, ys, kind="line+points"))
        marker_y = w.ms["attention"]
        source = (f"{gpu}, {'published figures of the reference study (vLLM 0.11)' if w.source == 'published' else 'our traces (vLLM 0.26)' if w.source else 'no data'}")
        chart = Chart(x_label="tokens in the window", y_label="GPU time (ms)", series=series, log_x=True,
                      x_ticks=list(LENGTHS), source=source,
                      marker=Marker(w.tokens, marker_y, "attention here") if marker_y is not None else None)
        note = _note(w, substituted, phase, length, gpu)
        return View(readouts=readouts, chart=chart, note=note)

    return Explorer(
        key="census",
        title="Where the GPU time of a window goes",
        controls=[Control("phase", "Window", values=list(PHASES), default="prefill"),
                  Control("length", "Tokens in the window", values=list(LENGTHS), default=28672),
                  Control("backend", "Attention backend", values=list(EXPLORED_BACKENDS)),
                  Control("gpu", "GPU", values=gpu_values)],
        view=view, why_missing=why_missing, skipped=skipped_note(root, "census.csv"))

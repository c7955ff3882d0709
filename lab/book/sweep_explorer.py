"""The vLLM sweep explorer: prompt length x backend x GPU study x chart -> TTFT, prefill cost per
token, decode ITL, the quadratic fit and the roofline floor.

One explorer serves the intro and chapter 6. It reads every ``sweep.csv`` through
:func:`lab.results.sweeps.sweep_table`, whose rows carry their dataset's provenance (GPU, engine,
chunk size, GPUs per server), so H200 runs, a tensor-parallel run over two GPUs and a reader's own
runs under ``data/local/`` appear as extra choices without code changes.
"""

from __future__ import annotations

import numpy as np

from lab import LabError
from lab.book.explorer import Chart, Control, Explorer, Marker, Readout, Series, View
from lab.measure.vllm.arms import book_order
from lab.results.data import DATA_DIR, skipped_note
from lab.results.hardware import match_device
from lab.results.sweeps import (  # noqa: F401  (study_of: this explorer's naming of studies, tested here)
    A10G_STUDY, arm_rows, finite_number, fits_by_arm, floors, gpu_count, ok_rows, study_label, study_of, sweep_table)

PREFERRED_LENGTH = 8192
FIT_POINTS = 48


def _labels(table, studies: list[str]) -> list[str]:
    labels = [study_label(table, s) + (" (your run)" if s.startswith("local/") else "") for s in studies]
    # same GPU and engine twice (another chunk size, say): name the folders of those studies only
    repeated = {label for label in labels if labels.count(label) > 1}
    return [f"{label} ({s})" if label in repeated else label for label, s in zip(labels, studies, strict=True)]


def _floors(table, studies):
    """study -> roofline floors over its lengths, or None for a GPU without a row in lab.results.hardware (a
    reader's own); a GPU of the table whose bandwidth ceiling is not on file is an error, not a missing floor."""
    out = {}
    for study in studies:
        rows = table[table["study"] == study]
        gpu = str(rows["gpu"].iloc[0])
        lengths = sorted(set(rows["actual_len"].dropna().astype(int)) | set(rows["target_len"].astype(int)))
        out[study] = floors(gpu, lengths, gpu_count(table, study)) if match_device(gpu) else None
    return out


def _floor_at(floor, n):
    """(prefill s, decode ms) of the floor at the length nearest n."""
    if floor is None or n is None:
        return None, None
    i = int(np.argmin(np.abs(floor["n"] - n)))
    return float(floor["prefill_s"][i]), float(floor["decode_s"][i] * 1e3)


def _ratio(measured, floor):
    return measured / floor if measured is not None and floor else None


def _series(table, study, backend, fit, floor, column, ttft_mode, order):
    rows = ok_rows(table[table["study"] == study])
    series = []
    for arm in sorted(rows["arm"].unique(), key=order):
        points = arm_rows(rows, study, arm).dropna(subset=[column])
        if len(points):
            series.append(Series(arm, points["actual_len"].tolist(), points[column].tolist(), kind="line+points"))
    if floor is not None:
        floor_y = floor["prefill_s"] if ttft_mode else floor["decode_s"] * 1e3
        series.append(Series("roofline floor", floor["n"].tolist(), [float(f"{y:.5g}") for y in floor_y],
                             kind="line", dashed=True, color="#444444"))
    if ttft_mode and fit is not None:  # over the backend's measured range: no extrapolation
        measured = arm_rows(rows, study, backend)["actual_len"]
        xs = sorted({round(x) for x in np.geomspace(measured.min(), measured.max(), FIT_POINTS)})
        series.append(Series(f"{backend} quadratic fit", xs, [float(f"{fit.predict(x):.5g}") for x in xs],
                             kind="line", dashed=True, color=next((s.color for s in series if s.name == backend), None)))
    return series


def _why_missing(table, labels: dict):
    """why_missing for the explorer: a backend a study never ran, or a length it did not reach."""
    measured = {(s, a, int(n)) for s, a, n in table[["study", "arm", "target_len"]].itertuples(index=False)}

    def why_missing(length, backend, study, metric):
        if (study, backend, length) in measured:
            return ""
        if not any(s == study and a == backend for s, a, _ in measured):
            return f"{backend} was not run on {labels[study]}"
        return f"{labels[study]} has no {backend} run at {length:,} tokens"

    return why_missing


def _point_readouts(row, attempted: int, fit, has_fit: bool, floor, spread_recorded: bool, at, ttft, itl, p10, p90,
                    prefill_floor, decode_floor) -> list[Readout]:
    """The sweep explorer's readouts at one point; each one without a value says why, in its place."""
    unmeasured = "did not finish" if attempted else "not measured at this length"
    no_fit = "not read past the measured lengths" if has_fit else "no fit"
    no_floor = "no datasheet figures for this GPU" if floor is None else unmeasured
    no_spread = unmeasured if spread_recorded else "not recorded in this dataset"
    return [
        Readout("ttft", "Time to first token", ttft, unit="s", fmt=".3f", missing=unmeasured),
        Readout("prefill", "Prefill cost per prompt token", row.get("prefill_ms_per_token"), unit="ms", fmt=".3f",
                missing=unmeasured),
        Readout("itl", "Decode inter-token latency (median)", itl, unit="ms", fmt=".2f", missing=unmeasured),
        Readout("quad_share", "Share of length-dependent prefill time in the n² term (fit)",
                fit.quad_share(at) * 100 if fit is not None else None, unit="%", fmt=".1f", missing=no_fit),
        Readout("fit", "Quadratic fit at this length", fit.predict(at) if fit is not None else None, unit="s",
                fmt=".3f", missing=no_fit),
        Readout("prefill_floor", "Roofline floor of the first token", prefill_floor, unit="s", fmt=".3f",
                missing=no_floor),
        Readout("ttft_floor", "TTFT / roofline floor", _ratio(ttft, prefill_floor), unit="×", fmt=".2f",
                missing=no_floor if ttft is not None else unmeasured),
        Readout("itl_range", "ITL p10 to p90", f"{p10:.2f} to {p90:.2f} ms" if p10 and p90 else None,
                missing=no_spread),
        Readout("decode_floor", "Roofline floor of a decode step", decode_floor, unit="ms", fmt=".2f",
                missing=no_floor),
        Readout("itl_floor", "ITL / roofline floor", _ratio(itl, decode_floor), unit="×", fmt=".2f",
                missing=no_floor if itl is not None else unmeasured),
    ]


def sweep_explorer(root=DATA_DIR, key: str = "sweep-explorer") -> Explorer:
    """Prompt length x backend x GPU study x chart (TTFT or ITL) -> the measured point, its fit and floor."""
    table = sweep_table(root)
    if ok_rows(table).empty:
        raise LabError(f"{root}: no measured sweep rows; run `python -m lab reference` first")
    studies = sorted(table["study"].unique(), key=lambda s: (s != A10G_STUDY, s.startswith("local/"),
                                                             gpu_count(table, s), s))
    labels = dict(zip(studies, _labels(table, studies), strict=True))
    lengths = sorted(int(n) for n in table["target_len"].unique())
    arms = book_order(table["arm"].unique())
    fits, floor_of = fits_by_arm(table), _floors(table, studies)
    longest = {s: int(table[table["study"] == s]["target_len"].max()) for s in studies}
    # ticks over the chosen study's lengths: the A10G chart ends where its data ends
    x_ticks = {s: [256 * 4 ** k for k in range(12) if 256 * 4 ** k <= longest[s]] for s in studies}

    why_missing = _why_missing(table, labels)
    # studies that recorded the spread of inter-token latencies (the A10G study's logs give one median ITL per length)
    spread = table["itl_p10_ms"] if "itl_p10_ms" in table else None
    has_spread = {s: spread is not None and bool(spread[table["study"] == s].notna().any()) for s in studies}

    def view(length, backend, study, metric):
        rows, gpu, floor = table[table["study"] == study], labels[study], floor_of[study]
        ttft_mode = metric == "TTFT"
        fit = fits.get((study, backend))
        series = _series(table, study, backend, fit, floor, "ttft_s" if ttft_mode else "itl_ms", ttft_mode, arms.index)
        point = rows[(rows["arm"] == backend) & (rows["target_len"] == length)]
        row = point.iloc[0] if len(point) else {}
        n = finite_number(row.get("actual_len"))
        ttft, itl = finite_number(row.get("ttft_s")), finite_number(row.get("itl_ms"))
        p10, p90 = finite_number(row.get("itl_p10_ms")), finite_number(row.get("itl_p90_ms"))
        prefill_floor, decode_floor = _floor_at(floor, n if n is not None else length)
        at = n if n is not None else length
        if fit is not None and at > 1.1 * arm_rows(ok_rows(rows), study, backend)["actual_len"].max():
            fit = None  # no readout far past the measured range: a fit is not a measurement
        readouts = _point_readouts(row, len(point), fit, fits.get((study, backend)) is not None, floor,
                                   has_spread[study], at, ttft, itl, p10, p90, prefill_floor, decode_floor)
        if not len(point):
            note = f"No {backend} measurement at {length} tokens on {gpu}; the fit and floor are shown at that length."
        elif ttft is None or n is None:
            note = f"The {backend} run at {length} tokens on {gpu} did not finish."
        else:
            # the slider names the requested length; the tokenizer may add one (a BOS token): say both
            note = (f"{backend}, {length}-token prompt on {gpu}." if int(n) == length else
                    f"{backend}, {length}-token prompt on {gpu} ({n:.0f} tokens once tokenized; the chart "
                    "plots that).")
        y = ttft if ttft_mode else itl
        # labelled with the slider's length (the note gives the tokenized length too)
        marker = Marker(n, y, label=f"{backend} @ {length}") if n is not None and y is not None else None
        model = rows["provenance"].iloc[0].get("model") or "model not recorded"
        chart = Chart(x_label="prompt length (tokens)",
                      y_label="time to first token (s)" if ttft_mode else "inter-token latency (ms)",
                      log_x=True, series=series, marker=marker, x_ticks=x_ticks[study],
                      source=f"{gpu}, {model}, bf16, batch 1, data/{study}")
        return View(readouts=readouts, chart=chart, note=note)

    default_length = PREFERRED_LENGTH if PREFERRED_LENGTH in lengths else lengths[len(lengths) // 2]
    return Explorer(
        key=key,
        title="Prompt length, backend and GPU: the first token and every token after it",
        controls=[Control("length", "Prompt length (tokens)", values=lengths, default=default_length),
                  Control("backend", "Attention backend", values=arms),
                  Control("study", "GPU(s) and engine", values=studies, labels=[labels[s] for s in studies]),
                  Control("metric", "Chart", values=["TTFT", "ITL"], labels=["time to first token", "inter-token latency"])],
        view=view, why_missing=why_missing, skipped=skipped_note(root, "sweep.csv"),
        caption="Points are measured; the grey dashed line is the roofline floor of the chosen GPU(s) "
                "(FLOPs over peak for the first token, bytes over the GPU's bandwidth ceiling for each later one); in the TTFT "
                "chart the coloured dashed curve is the chosen backend's quadratic fit t = a + b·n + c·n². "
                "A study over two GPUs is one server with the model split between them (tensor parallel).",
    )


def a10g_prefill_explorer(root=DATA_DIR) -> Explorer:
    """The same explorer under the intro's name (it opens on the published A10G study)."""
    return sweep_explorer(root, key="prefill-explorer")

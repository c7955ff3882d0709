"""The book's explorers over cached data (each a :class:`lab.book.explorer.Explorer`).

``a10g_prefill_explorer()`` is the first one: prompt length x backend x GPU/study -> TTFT,
prefill cost per token, decode ITL and the share of prefill time the quadratic term explains.
It reads every ``sweep.csv`` through :func:`lab.results.data.load_sweeps`, so H200 runs and a reader's
own runs under ``data/local/`` appear as extra GPU/study choices without code changes.
"""

from __future__ import annotations

from pathlib import Path

from lab import LabError
from lab.results.data import DATA_DIR, load_sweeps
from lab.results.fit import fit_quadratic, ok_rows
import numpy as np

from lab.results.sweeps import (  # noqa: F401  (study_of, sweep_table: this explorer's data, named here)
    A10G_STUDY, arm_rows, finite_number, fits_by_arm, floors, provenance, study_label, study_of, sweep_table, sweeps)
from lab.book.explorer import Chart, Control, Explorer, Marker, Readout, Series, View

#: Backend shown first when a study has it.
PREFERRED_ARMS = ("FLASH_ATTN", "FLASH_ATTN/FA3")
PREFERRED_LENGTH = 8192
FIT_POINTS = 48


def _study_label(provenance: dict) -> str:
    engine = f"vLLM {provenance['vllm']}" if provenance.get("vllm") else "vLLM"
    return f"{provenance['gpu']}, {engine}"


def a10g_prefill_explorer(root=DATA_DIR) -> Explorer:
    """Prompt length x backend x GPU/study -> TTFT, prefill ms/token, decode ITL, quadratic share."""
    table = sweep_table(root)
    studies = sorted(table["study"].unique(), key=lambda s: (not s.startswith("reference/"), s))
    lengths = sorted(int(n) for n in table["target_len"].unique())
    arms = sorted(table["arm"].unique(), key=lambda a: (a not in PREFERRED_ARMS, a))
    provs = {s: provenance(table, s) for s in studies}
    labels = {s: _study_label(provs[s]) for s in studies}
    repeated = {label for label in labels.values() if list(labels.values()).count(label) > 1}
    labels = {s: f"{label} ({s})" if label in repeated else label  # same GPU and engine twice: name the folders
              for s, label in labels.items()}

    x_ticks = [256 * 4 ** k for k in range(12) if 256 * 4 ** k <= max(lengths)]
    fits = fits_by_arm(table)

    def view(length, backend, study):
        rows = table[table["study"] == study]
        gpu = labels[study]
        series = []
        for arm in sorted(rows["arm"].unique(), key=lambda a: (a not in PREFERRED_ARMS, a)):
            arm_rows = rows[rows["arm"] == arm].sort_values("actual_len")
            series.append(Series(arm, arm_rows["actual_len"].tolist(), arm_rows["ttft_s"].tolist(), kind="line+points"))
        fit = fits.get((study, backend))
        if fit is not None:
            arm_rows = rows[rows["arm"] == backend]
            lo, hi = float(arm_rows["actual_len"].min()), float(arm_rows["actual_len"].max())
            # Whole tokens and 5 significant digits: the curve is for the eye, and the page stays small.
            xs = sorted({round(lo * (hi / lo) ** (i / (FIT_POINTS - 1))) for i in range(FIT_POINTS)})
            series.append(Series(f"{backend} quadratic fit", xs, [float(f"{fit.predict(x):.5g}") for x in xs],
                                 kind="line", dashed=True, color=series[[s.name for s in series].index(backend)].color))
        point = rows[(rows["arm"] == backend) & (rows["target_len"] == length)]
        row = point.iloc[0] if len(point) else {}
        ttft, actual = finite_number(row.get("ttft_s")), finite_number(row.get("actual_len"))
        share = fit.quad_share(actual) * 100 if fit is not None and actual is not None else None
        readouts = [
            Readout("ttft", "Time to first token", ttft, unit="s", fmt=".3f"),
            Readout("prefill", "Prefill cost per prompt token", row.get("prefill_ms_per_token"), unit="ms", fmt=".3f"),
            Readout("itl", "Decode inter-token latency", row.get("itl_ms"), unit="ms", fmt=".2f"),
            Readout("quad_share", "Share of length-dependent prefill time in the n² term (fit)", share, unit="%", fmt=".1f"),
        ]
        if not len(point):
            note = f"No {backend} measurement at {length} tokens on {gpu}."
        elif ttft is None or actual is None:
            note = f"The {backend} run at {length} tokens on {gpu} did not finish."
        else:
            note = f"{backend}, {actual:.0f} prompt tokens on {gpu}."
        marker = Marker(actual, ttft, label=f"{backend} @ {actual:.0f}") if ttft is not None and actual is not None else None
        model = provs[study].get("model") or "model not recorded"
        chart = Chart(x_label="prompt length (tokens)", y_label="time to first token (s)", log_x=True,
                      series=series, marker=marker, x_ticks=x_ticks,
                      source=f"{gpu}, {model}, data/{study}")
        return View(readouts=readouts, chart=chart, note=note)

    if not lengths or not arms:
        raise LabError(f"{root}: the sweeps hold no rows; run `python -m lab reference` first")
    default_length = PREFERRED_LENGTH if PREFERRED_LENGTH in lengths else lengths[len(lengths) // 2]
    return Explorer(
        key="prefill-explorer",
        title="Prompt length and attention backend: what the first token costs",
        controls=[
            Control("length", "Prompt length (tokens)", values=lengths, default=default_length),
            Control("backend", "Attention backend", values=arms),
            Control("study", "GPU and study", values=studies, labels=[labels[s] for s in studies]),
        ],
        view=view,
        caption="Points are measured prompt lengths; the dashed curve is the quadratic fit t = a + b·n + c·n² "
                "for the chosen backend.",
    )


def sweep_explorer(root=DATA_DIR):
    """Prompt length x backend x GPU study x metric -> TTFT, ITL, the fitted curve and the roofline floor."""
    table = sweeps(root)
    if table.empty:
        raise LabError(f"{root}: no measured sweep rows; run `python -m lab reference` first")
    studies = sorted(table["study"].unique(), key=lambda s: (s != A10G_STUDY, s.startswith("local/"), s))
    labels = [f"{study_label(table, s)}" + (" (your run)" if s.startswith("local/") else "") for s in studies]
    if len(set(labels)) < len(labels):
        labels = [f"{label} ({s})" for label, s in zip(labels, studies, strict=True)]
    lengths = sorted(int(n) for n in table["target_len"].unique())
    arms = sorted(table["arm"].unique(), key=lambda a: (not a.startswith("FLASH_ATTN"), a))

    fits = fits_by_arm(table)
    floor_of = {}
    for study in studies:
        rows = table[table["study"] == study]
        floor_of[study] = floors(str(rows["gpu"].iloc[0]), rows["actual_len"])

    def view(length, backend, study, metric):
        rows = table[table["study"] == study]
        gpu = labels[studies.index(study)]
        ttft_mode = metric == "TTFT"
        column = "ttft_s" if ttft_mode else "itl_ms"
        series = []
        for arm in sorted(rows["arm"].unique(), key=arms.index):
            arm_table = arm_rows(table, study, arm).dropna(subset=[column])
            series.append(Series(arm, arm_table["actual_len"].tolist(), arm_table[column].tolist(), kind="line+points"))
        floor = floor_of[study]
        floor_y = floor["prefill_s"] if ttft_mode else floor["decode_s"] * 1e3
        series.append(Series("roofline floor", floor["n"].tolist(), floor_y.tolist(), kind="line", dashed=True,
                             color="#444444"))
        fit = fits.get((study, backend))
        if ttft_mode and fit is not None:  # over the backend's measured range: no extrapolation
            measured = arm_rows(table, study, backend)["actual_len"]
            xs = np.geomspace(measured.min(), measured.max(), 48)
            series.append(Series(f"{backend} fit", xs.tolist(), fit.predict(xs).tolist(), kind="line", dashed=True,
                                 color=next((s.color for s in series if s.name == backend), None)))
        point = rows[(rows["arm"] == backend) & (rows["target_len"] == length)]
        row = point.iloc[0] if len(point) else {}
        n = finite_number(row.get("actual_len"))
        i = int(np.argmin(np.abs(floor["n"] - n))) if n is not None else None
        ttft, itl = finite_number(row.get("ttft_s")), finite_number(row.get("itl_ms"))
        p10, p90 = finite_number(row.get("itl_p10_ms")), finite_number(row.get("itl_p90_ms"))
        readouts = [
            Readout("ttft", "Time to first token", ttft, unit="s", fmt=".3f"),
            Readout("fit", "Quadratic fit at this length", fit.predict(n) if fit is not None and n else None,
                    unit="s", fmt=".3f"),
            Readout("ttft_floor", "TTFT / roofline floor", ttft / floor["prefill_s"][i] if ttft and i is not None else None,
                    unit="x", fmt=".2f"),
            Readout("itl", "Decode inter-token latency (median)", itl, unit="ms", fmt=".2f"),
            Readout("itl_range", "ITL p10 to p90", f"{p10:.2f} to {p90:.2f} ms" if p10 and p90 else "not recorded"),
            Readout("itl_floor", "ITL / roofline floor", itl / (floor["decode_s"][i] * 1e3) if itl and i is not None else None,
                    unit="x", fmt=".2f"),
        ]
        if not len(point):
            note = f"No {backend} measurement at {length} tokens on {gpu}."
        else:
            note = f"{backend}, {n:.0f}-token prompt on {gpu}."
        y = ttft if ttft_mode else itl
        marker = Marker(n, y, label=f"{backend} @ {n:.0f}") if n is not None and y is not None else None
        chart = Chart(x_label="prompt length (tokens)",
                      y_label="time to first token (s)" if ttft_mode else "inter-token latency (ms)",
                      log_x=True, series=series, marker=marker,
                      x_ticks=[256 * 4 ** k for k in range(8) if 256 * 4 ** k <= max(lengths)],
                      source=f"{gpu}, Qwen2.5-7B shape, bf16, batch 1, data/{study}")
        return View(readouts=readouts, chart=chart, note=note)

    default_length = 8192 if 8192 in lengths else lengths[len(lengths) // 2]
    return Explorer(
        key="vllm-sweep-explorer",
        title="Prompt length, backend and GPU: first token and every token after it",
        controls=[Control("length", "Prompt length (tokens)", values=lengths, default=default_length),
                  Control("backend", "Attention backend", values=arms),
                  Control("study", "GPU and engine", values=studies, labels=labels),
                  Control("metric", "Chart", values=["TTFT", "ITL"], labels=["time to first token", "inter-token latency"])],
        view=view,
        caption="Points are measured; the grey dashed line is the roofline floor of the chosen GPU "
                "(FLOPs over peak for the first token, bytes over bandwidth for each later one); in the TTFT "
                "chart the coloured dashed curve is the chosen backend's quadratic fit.",
    )

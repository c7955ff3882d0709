"""The book's explorers over cached data (each a :class:`lab.widgets.Explorer`).

``a10g_prefill_explorer()`` is the first one: prompt length x backend x GPU/study -> TTFT,
prefill cost per token, decode ITL and the share of prefill time the quadratic term explains.
It reads every ``sweep.csv`` through :func:`lab.data.load_sweeps`, so H200 runs and a reader's
own runs under ``data/local/`` appear as extra GPU/study choices without code changes.
"""

from __future__ import annotations

from pathlib import Path

from lab import LabError
from lab.data import DATA_DIR, load_sweeps
from lab.fit import fit_quadratic, ok_rows
from lab.vllm.report import finite_number, provenance
from lab.widgets import Chart, Control, Explorer, Marker, Readout, Series, View

#: Backend shown first when a study has it.
PREFERRED_ARMS = ("FLASH_ATTN", "FLASH_ATTN/FA3")
PREFERRED_LENGTH = 8192
FIT_POINTS = 48


def study_of(dataset: str, root: Path = DATA_DIR) -> str:
    """The study a dataset belongs to: the first two folders of its path under ``root`` (data/).

    ``h200/vllm0.26-qwen2.5-7b/FLASH_ATTN_FA3`` -> ``h200/vllm0.26-qwen2.5-7b``: one arm per folder,
    one study per GPU and engine version, so every arm of that GPU is drawn together.
    """
    path = Path(dataset)
    if path.is_absolute():
        path = path.relative_to(root)
    return "/".join(path.parts[:2])


def fits_by_arm(table) -> dict:
    """(study, arm) -> the quadratic prefill fit from lab.fit, for every arm with 3+ measured lengths."""
    fits = {}
    for (study, arm), rows in ok_rows(table).groupby(["study", "arm"]):
        if rows["actual_len"].nunique() >= 3:  # a reader's partial run may have fewer: no curve, no share
            fits[study, arm] = fit_quadratic(rows["actual_len"], rows["ttft_s"])
    return fits


def sweep_table(root=DATA_DIR):
    """All sweeps with a ``study`` column; a re-run of the same arm and length replaces the earlier row."""
    table = load_sweeps(root)
    table.insert(0, "study", table["dataset"].map(lambda name: study_of(name, Path(root))))
    return table.drop_duplicates(["study", "arm", "target_len"], keep="last").reset_index(drop=True)


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

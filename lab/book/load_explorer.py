"""The busy-server explorer: backend x load x SLO x chart -> the latency percentiles, throughput and goodput
of one ``vllm bench serve`` point, on the latency-throughput curves of every backend.

It reads the H200 load study (``data/h200/vllm0.26-qwen2.5-7b-load/<workload>/<arm>/``) and a reader's own
runs (``data/local/vllm-load/<workload>/<arm>/``, from ``python -m lab vllm-load`` or the run panel)
through :mod:`lab.results.load`; a reader's run is one more backend choice, "(your run)". Goodput is
recomputed from each request's times at the chosen SLO (:func:`lab.results.load.goodput`), not read
from the one SLO the bench scored. With neither study on file, :func:`load_explorer` returns None and
:func:`missing_note` says what is missing.

The load control is a step, lightest first, not a request rate: each backend's rates are fractions of
its *own* measured capacity, so an absolute rate would be measured for one backend only and most
(backend, rate) pairs would have no data. The i-th step is the i-th lowest rate each backend ran, which
for the study is the same fraction of each backend's capacity (the labels say which, when every
backend was planned from the same fractions); the readouts and the chart give the actual rate.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from lab import REPO_ROOT
from lab.book.explorer import MAX_COMBINATIONS, Chart, Control, Explorer, Marker, Readout, Series, View
from lab.measure.vllm.arms import book_order
from lab.measure.vllm.bench import DEFAULT_SLO_MS
from lab.results import load as rl
from lab.results.ours_serving import LOAD_ONCE_RUN
from lab.results.ours_serving import LOAD_RUN as OURS_LOAD_RUN
from lab.store import DATA_DIR, LOCAL_DIR

FIXED_WORKLOAD = "random-1024-128"
MIX_WORKLOAD = "mix-1024-128"
H200_ROOT = DATA_DIR / "h200"
LOCAL_ROOT = LOCAL_DIR / rl.LOCAL_STUDY
#: The SLO targets offered (ms): a few pairs, so the static page stays small (MAX_COMBINATIONS).
TTFT_SLOS = (200.0, 500.0, 1000.0)
TPOT_SLOS = (25.0, 50.0)
#: chart value -> (metric, percentile, axis label)
CHARTS = {"ttft-p99": ("ttft", 99, "p99 time to first token (ms)"), "ttft-p50": ("ttft", 50, "median time to first token (ms)"),
          "itl-p99": ("itl", 99, "p99 inter-token latency (ms)"), "itl-p50": ("itl", 50, "median inter-token latency (ms)")}
CHART_LABELS = ("p99 TTFT vs throughput", "median TTFT vs throughput", "p99 ITL vs throughput",
                "median ITL vs throughput")
SLO_COLOR = "#444444"


class _Arm:
    """One backend choice: an arm folder's points, what it is called, and what the page says about it."""

    def __init__(self, run: rl.ArmRun, key: str, names: tuple[str, str], local: bool, slos):
        self.run, self.key, self.local = run, key, local
        self.label, self.series_name = names   # the choice's label, the legend's (shorter) name
        self.points = rl.poisson_points(run.rows)
        self.capacity = rl.capacity(run.rows)
        # every point's goodput at every offered SLO, each result file read once
        self.goodput = [rl.point_goodputs(row, slos) for row in self.points]
        flags = run.provenance.get("flags") or {}
        self.fractions = sorted(flags["fractions"]) if flags.get("fractions") and not flags.get("rates") else None
        self.gpu = run.provenance.get("gpu") or "GPU not recorded"

    def point(self, step: int) -> tuple[dict, dict]:
        return self.points[step - 1], self.goodput[step - 1]


def _local_names(run: rl.ArmRun, runs: list[rl.ArmRun]) -> tuple[str, str]:
    """(choice label, legend name) of a reader's run: its GPU, and its prompt count where one arm has several."""
    flags = run.provenance.get("flags") or {}
    gpu = run.provenance.get("gpu") or "GPU not recorded"
    which = ""
    if sum(r.label == run.label for r in runs) > 1:  # one folder per prompt count (the run panel's): say which
        prompts = flags.get("max_prompts") if flags.get("max_prompts") == flags.get("min_prompts") else None
        which = f", {prompts} prompts" if prompts else f", {run.folder.name}"
    return f"{run.label} (your run, {gpu}{which})", f"yours: {run.label}{which}"


def _arms(workload: str, root: Path, study: str, local_root: Path, slos) -> tuple[list[_Arm], str]:
    """The H200 study's backends in the book's order, then the reader's runs (as many as the page holds)."""
    h200 = {run.label: run for run in rl.arm_runs(Path(root) / study / workload)}
    arms = [_Arm(h200[label], label, (label, label), False, slos) for label in book_order(h200)]
    broken = []   # a reader's folder that fails its checks is left out and named; the study's is an error
    local = rl.arm_runs(Path(local_root) / workload, broken)
    arms += [_Arm(run, f"local/{run.folder.name}", _local_names(run, local), True, slos) for run in local]
    arms = [a for a in arms if a.points]       # a folder with only its capacity point has no step to show
    steps = max((len(a.points) for a in arms), default=0)
    room = MAX_COMBINATIONS // max(1, steps * len(slos) * len(CHARTS))
    notes = [f"Left out, its files do not pass their check: {_shown(folder)} ({reason})" for folder, reason in broken]
    if len(arms) > room:
        left_out = [a for a in arms if a.local][: len(arms) - room]
        arms = [a for a in arms if a not in left_out]
        notes.append(f"{len(left_out)} of your runs left out (the page holds {room} backends): "
                     + ", ".join(_shown(a.run.folder) for a in left_out))
    return arms, " ".join(notes)


def _step_labels(arms: list[_Arm], steps: int) -> list[str]:
    """'0.25× capacity' ... when every backend ran the same fractions of its capacity, one point each; else 1..K."""
    fractions = {tuple(a.fractions) if a.fractions else None for a in arms}
    if len(fractions) == 1 and None not in fractions:
        (shared,) = fractions
        if len(shared) == steps and all(len(a.points) == steps for a in arms):
            return [f"{f:g}× capacity" for f in shared]
    return [f"{i} of {steps}" for i in range(1, steps + 1)]


def _percentiles(row: dict, metric: str, fmt: str) -> str:
    return " / ".join(format(row[f"p{p}_{metric}_ms"], fmt) for p in rl.PERCENTILES) + " ms"


def _readouts(arm: _Arm, row: dict, goodput: float, ttft_slo: float, tpot_slo: float) -> list[Readout]:
    limits = {"ttft": ttft_slo, "tpot": tpot_slo}
    best = rl.highest_rate_meeting(arm.run.rows, limits)
    no_capacity = "no all-at-once point on file"
    return [
        Readout("rate", "Request rate (Poisson arrivals)", row["rate"], unit="req/s", fmt=".3g"),
        Readout("load", "Rate / this backend's capacity", row["rate"] / arm.capacity if arm.capacity else None,
                unit="×", fmt=".2f", missing=no_capacity),
        Readout("throughput", "Achieved throughput", row["request_throughput"], unit="req/s", fmt=".3g"),
        Readout("tokens", "Generated tokens per second", row["output_throughput"], unit="tokens/s", fmt=",.0f"),
        Readout("ttft", "TTFT p50 / p90 / p99", _percentiles(row, "ttft", ",.0f")),
        Readout("tpot", "TPOT p50 / p90 / p99", _percentiles(row, "tpot", ".1f")),
        Readout("itl", "ITL p50 / p90 / p99", _percentiles(row, "itl", ".1f")),
        Readout("e2el", "End-to-end latency p50 / p90 / p99", _percentiles(row, "e2el", ",.0f")),
        Readout("goodput", "Goodput: requests per second that met both targets", goodput, unit="req/s", fmt=".3g"),
        Readout("good_share", "Requests that met both targets", 100 * goodput * row["duration_s"] / row["completed"],
                unit="%", fmt=".0f"),
        Readout("best_rate", "Highest measured rate with p99 TTFT and p99 TPOT within the targets", best,
                unit="req/s", fmt=".3g", missing="none of the measured rates"),
        Readout("capacity", "Capacity (every prompt at once)", arm.capacity, unit="req/s", fmt=".3g",
                missing=no_capacity),
    ]


def _note(arm: _Arm, row: dict, workload: str) -> str:
    note = (f"{arm.label} on {arm.gpu}: {row['num_prompts']} prompts ({describe(workload)}) arriving at {row['rate']:g} "
            f"requests/s, finished in {row['duration_s']:.0f} s")
    note += f", {row['failed']} failed." if row["failed"] else "."
    if arm.capacity and row["rate"] > arm.capacity:
        note += (" Past saturation: requests arrive faster than the server finishes them, so the queue grows for "
                 "the whole run and the TTFT percentiles depend on how long it ran.")
    return note


def describe(workload: str) -> str:
    """A workload folder's name in words: ``random-1024-128`` -> '1,024-token prompts, 128 generated tokens each'."""
    found = re.fullmatch(r"(random|mix)-(\d+)-(\d+)", workload)
    if not found:
        return workload
    kind, n_in, n_out = found.group(1), int(found.group(2)), int(found.group(3))
    if kind == "mix":
        return f"a long-tailed mix of prompts around {n_in:,} tokens, {n_out} generated tokens"
    return f"{n_in:,}-token prompts, {n_out} generated tokens each"


def log_ticks(low: float, high: float) -> list[float]:
    """1, 2, 5 x powers of ten from the one at or below ``low`` to the one at or above ``high``."""
    ladder = [m * 10.0 ** e for e in range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1)
              for m in (1, 2, 5)]
    start = max(i for i, v in enumerate(ladder) if v <= low)
    end = min(i for i, v in enumerate(ladder) if v >= high)
    return [float(f"{v:.3g}") for v in ladder[start:end + 1]]


def _shown(path: Path) -> str:
    """A study folder as the chart's source names it: from the repository, or its study and workload elsewhere."""
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(Path(*path.parts[-2:]))


def _source(arms: list[_Arm]) -> str:
    parts = []
    for local in (False, True):
        # the study, then its workload and the folder above: no long unbroken path (a phone's chart is narrow)
        folders = sorted({f"{a.run.folder.parent.parent.name}, {a.run.folder.parent.name} "
                          f"(in {_shown(a.run.folder.parent.parent.parent)})" for a in arms if a.local == local})
        gpus = sorted({a.gpu for a in arms if a.local == local})
        if folders:
            parts.append(f"{'your runs' if local else ', '.join(gpus)}: {', '.join(folders)}")
    return "vllm bench serve, random weights in the Qwen2.5-7B shape; " + "; ".join(parts)


def load_explorer(workload: str = FIXED_WORKLOAD, *, root: Path = H200_ROOT, study: str = rl.H200_STUDY,
                  local_root: Path = LOCAL_ROOT, key: str | None = None) -> Explorer | None:
    """Backend x load step x TTFT target x TPOT target x chart -> one load point; None when nothing is on file."""
    slos = [(t, p) for t in TTFT_SLOS for p in TPOT_SLOS]
    arms, skipped = _arms(workload, root, study, local_root, slos)
    if not arms:
        return None
    by_key = {a.key: a for a in arms}
    steps = max(len(a.points) for a in arms)
    source = _source(arms)
    # 1-2-5 ticks over every TTFT a chart can show (log axis), so both faces label the same values
    ttfts = [r[f"p{p}_ttft_ms"] for a in arms for r in a.points for p in (50, 99)] + list(TTFT_SLOS)
    ticks = {"ttft": log_ticks(min(ttfts), max(ttfts)), "itl": None}

    def why_missing(arm, load, ttft_slo, tpot_slo, chart):
        measured = len(by_key[arm].points)
        return "" if load <= measured else f"{by_key[arm].label} was measured at {measured} rate(s) only"

    def view(arm, load, ttft_slo, tpot_slo, chart):
        chosen = by_key[arm]
        row, goodputs = chosen.point(load)
        metric, percentile, y_label = CHARTS[chart]
        column = f"p{percentile}_{metric}_ms"
        series = [Series(a.series_name, [r["request_throughput"] for r in a.points], [r[column] for r in a.points],
                         kind="line+points", dashed=a.local) for a in arms]
        if metric == "ttft":
            widest = max(r["request_throughput"] for a in arms for r in a.points)
            series.append(Series(f"TTFT target {ttft_slo:g} ms", [0, widest], [ttft_slo, ttft_slo], kind="line",
                                 dashed=True, color=SLO_COLOR))
        marker = Marker(row["request_throughput"], row[column], label=f"{chosen.series_name} at {row['rate']:g} req/s")
        return View(readouts=_readouts(chosen, row, goodputs[(ttft_slo, tpot_slo)], ttft_slo, tpot_slo),
                    chart=Chart(x_label="achieved throughput (requests/s)", y_label=y_label, series=series,
                                marker=marker, log_y=metric == "ttft", y_ticks=ticks[metric], source=source),
                    note=_note(chosen, row, workload))

    default_arm = next(a for a in arms if len(a.points) == steps)
    return Explorer(
        key=key or ("load-explorer" if workload == FIXED_WORKLOAD else "load-" + re.sub(r"[^a-z0-9]+", "-", workload.lower())),
        title=f"A busy server under Poisson load: {describe(workload)}",
        controls=[Control("arm", "Attention backend", values=[a.key for a in arms], default=default_arm.key,
                          labels=[a.label for a in arms]),
                  Control("load", "Load, light to past saturation", values=list(range(1, steps + 1)),
                          default=min(steps, steps // 2 + 1), labels=_step_labels(arms, steps)),
                  Control("ttft_slo", "TTFT target (ms)", values=list(TTFT_SLOS), default=DEFAULT_SLO_MS["ttft"],
                          labels=[f"{v:g} ms" for v in TTFT_SLOS]),
                  Control("tpot_slo", "TPOT target (ms)", values=list(TPOT_SLOS), default=DEFAULT_SLO_MS["tpot"],
                          labels=[f"{v:g} ms" for v in TPOT_SLOS]),
                  Control("chart", "Chart", values=list(CHARTS), labels=list(CHART_LABELS))],
        view=view, why_missing=why_missing, skipped=skipped,
        caption="Each point is one run of vLLM's own benchmark client, vllm bench serve, with Poisson arrivals at one "
                "rate; each backend's rates are fractions of its own capacity (every prompt sent at once), and the "
                "chart puts every point at the throughput it achieved. A request is good when its TTFT and its TPOT "
                "(time per generated token after the first) both meet their targets, vLLM's rule; goodput counts "
                "the good requests per second. Dashed lines are a reader's own runs.")


def mix_load_explorer() -> Explorer | None:
    """The same explorer over the long-tailed mix of prompt lengths."""
    return load_explorer(MIX_WORKLOAD)


def ours_load_explorer(run: str = OURS_LOAD_RUN, key: str = "ours-load-explorer") -> Explorer | None:
    """The same explorer over a chapter 6c lease that put OURS and FA3 under the same load (an H100's run; by
    default the first load study)."""
    gpu, study = run.split("/")
    return load_explorer(root=DATA_DIR / gpu, study=study, key=key)


def once_load_explorer() -> Explorer | None:
    """The compile-once load study's: OURS with kernels that compile once per server and warm up, FA3 beside it."""
    return ours_load_explorer(LOAD_ONCE_RUN, "ours-load-once-explorer")


def missing_note(workload: str = FIXED_WORKLOAD, root: Path = H200_ROOT, study: str = rl.H200_STUDY) -> str:
    """What a chapter prints where :func:`load_explorer` returned None."""
    folder = Path(root) / study / workload
    shown = folder.relative_to(DATA_DIR.parent) if folder.is_relative_to(DATA_DIR.parent) else folder
    return (f"Not measured yet: {shown}/ is not on file (scripts/gpu_run.sh vllm-busy-server measures it; "
            f"`python -m lab vllm-load` or the run panel below writes a run of your own).")

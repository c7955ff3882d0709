"""Census results as data: the published A10G figures and our H200 windows in one table.

``lab.measure.census`` turns one trace into a census; this module gathers the stored results of many
windows (every ``census.csv`` under ``data/``: the reference study's published figures and the
``census`` datasets written by ``python -m lab capture vllm``), answers "attention / matmul /
other for this GPU, phase, length and backend" with what is known and what is derived, and builds
the chapter's explorer.

Phases: ``prefill`` (one max_tokens=1 request), ``decode`` (decode steps only) and
``decode-naive`` (the reference study's decode window: the whole request, prefill included).
The published A10G "decode" windows are of the naive kind, so they are filed as ``decode-naive``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from lab import LabError
from lab.measure.families import FAMILIES
from lab.measure.gpuclocks import dominant_limit, readings_held, samples_with
from lab.results.data import DATA_DIR, datasets
from lab.results.facts import Fact
from lab.results.quantities import Quantity

#: The run that holds our H200 profiler windows (``traces/<arm>/``) beside its latency sweeps.
H200_TRACES = "h200/vllm0.26-qwen2.5-7b"
#: How often the H200 captures sampled the clocks: stated by chapter 7 and by the method appendix.
SAMPLE_INTERVAL = Quantity("h200.capture.sample_interval_ms", "how often the capture asked nvidia-smi for the clocks, "
                           "power and clock limits", run=H200_TRACES, file="traces", unit="ms")

PHASES = ("prefill", "decode", "decode-naive")
PHASE_LABELS = {"prefill": "prefill window", "decode": "decode steps only",
                "decode-naive": "decode window as in the study (prefill included)"}
#: Nominal window lengths; the study's exact counts (2050, 8193, 28673) round to these in units of 1024.
LENGTHS = (2048, 8192, 28672)
BACKENDS = ("FlashAttention", "FlexAttention")
#: What the explorer offers: those two, and OURS, the book's kernels as vLLM's backend (lab.measure.vllm.backend),
#: captured on the H100 of that lease only.
EXPLORED_BACKENDS = (*BACKENDS, "OURS")
#: Tokens generated inside the reference study's decode window (its method, FACTS.md: "a 30-token generation").
REFERENCE_DECODE_WINDOW_TOKENS = 30


def backend_of(arm: str) -> str:
    """``FLASH_ATTN``, ``FLASH_ATTN/FA3`` -> FlashAttention; ``FLEX_ATTENTION`` -> FlexAttention."""
    if arm.startswith("FLASH_ATTN"):
        return "FlashAttention"
    if arm.startswith("FLEX"):
        return "FlexAttention"
    return arm


def short_gpu(gpu: str) -> str:
    """The model of a GPU name: ``NVIDIA H200`` -> ``H200``, ``NVIDIA H100 80GB HBM3`` -> ``H100``,
    ``NVIDIA GeForce RTX 4090`` -> ``RTX 4090`` (form factor and memory size dropped)."""
    words = gpu.replace("NVIDIA ", "").replace("GeForce ", "").split()
    kept = []
    for word in words:
        if re.match(r"(SXM|NVL|PCIe|HBM|\d+GB)", word, re.IGNORECASE):
            break
        kept.append(word)
    return " ".join(kept) or gpu


def nominal(tokens: float) -> int:
    """The nominal window length a token count belongs to (2050 -> 2048, 28673 -> 28672)."""
    return min(LENGTHS, key=lambda n: abs(n - float(tokens)))


def gpu_label(ds) -> str:
    """The GPU a dataset ran on, as the census tables name it: ``H200``, or ``2x H200`` for one server that
    spans two GPUs (tensor parallelism), so that its windows never mix with the one-GPU windows."""
    gpus = (ds.provenance.get("flags") or {}).get("tensor_parallel_size") or 1
    return short_gpu(ds.gpu) if gpus == 1 else f"{gpus}x {short_gpu(ds.gpu)}"


def census_table(root: Path = DATA_DIR):
    """Every stored census row, long format, with columns dataset, gpu, source, backend, nominal.

    ``source`` is "published" for reference datasets and "measured" for our captures; window
    seconds are converted to ms so one unit serves every window.
    """
    import pandas as pd

    tables = []
    for ds in datasets(root=root):
        if ds.kind not in ("reference", "census") or not ds.has("census.csv"):
            continue
        table = ds.csv("census.csv", ("phase", "tokens", "arm", "metric", "value", "unit"))
        table = table.copy()
        if ds.kind == "reference":
            table["phase"] = table["phase"].replace({"decode": "decode-naive"})
        seconds = table["metric"] == "window_s"
        table.loc[seconds, "value"] = table.loc[seconds, "value"] * 1000.0
        table.loc[seconds, "unit"] = "ms"
        table.loc[seconds, "metric"] = "window_ms"
        table.insert(0, "source", "published" if ds.kind == "reference" else "measured")
        table.insert(0, "gpu", gpu_label(ds))  # a TP window is its own GPU choice
        table.insert(0, "dataset", ds.name)
        tables.append(table)
    if not tables:
        raise LabError(f"{root}: no census.csv in any dataset; run `python -m lab reference` first")
    table = pd.concat(tables, ignore_index=True)
    table["backend"] = table["arm"].map(backend_of)
    table["nominal"] = table["tokens"].map(nominal)
    # A re-capture of the same window replaces the earlier one.
    return table.drop_duplicates(["gpu", "phase", "nominal", "backend", "metric"], keep="last").reset_index(drop=True)


#: Families a source may not list: the reference study and captures made before ``communication``
#: was a family ran on one GPU, which launches no collectives, so their communication time is 0 ms.
SINGLE_GPU_ZERO = ("communication",)


@dataclass
class WindowCensus:
    """Attention / matmul / other (ms) of one window; None where neither published nor derivable."""

    gpu: str
    phase: str
    tokens: int
    backend: str
    source: str | None = None
    window_ms: float | None = None
    ms: dict = field(default_factory=lambda: dict.fromkeys(FAMILIES))
    derived: list[str] = field(default_factory=list)   # which figures were computed, not read

    @property
    def known(self) -> bool:
        return self.window_ms is not None or any(v is not None for v in self.ms.values())

    def share(self, family: str) -> float | None:
        value = self.ms.get(family)
        if value is None or not self.window_ms:
            return None
        return 100.0 * value / self.window_ms


def window(table, gpu: str, phase: str, tokens: int, backend: str) -> WindowCensus:
    """What is known about one window, completing it by arithmetic where the rest is given.

    other = window - attention - matmul when all three others are known; attention = share x window
    when only the share and the window are published. Each derived figure is named in ``derived``.
    """
    rows = table[(table["gpu"] == gpu) & (table["phase"] == phase) & (table["nominal"] == nominal(tokens))
                 & (table["backend"] == backend)]
    result = WindowCensus(gpu, phase, nominal(tokens), backend)
    if rows.empty:
        return result
    result.source = rows["source"].iloc[0]
    values = dict(zip(rows["metric"], rows["value"].astype(float), strict=True))

    def number(key):
        value = values.get(key)
        return None if value is None or not math.isfinite(value) else value

    result.window_ms = number("window_ms")
    for fam in FAMILIES:
        result.ms[fam] = number(f"{fam}_ms")
    for fam in SINGLE_GPU_ZERO:
        if result.ms[fam] is None and number(f"{fam}_share_pct") is None:
            result.ms[fam] = 0.0
    for fam in FAMILIES:
        share = number(f"{fam}_share_pct")
        if result.ms[fam] is None and share is not None and result.window_ms is not None:
            result.ms[fam] = share / 100.0 * result.window_ms
            result.derived.append(f"{fam} = share x window")
    missing = [f for f in FAMILIES if result.ms[f] is None]
    if result.window_ms is not None and len(missing) == 1:
        rest = sum(v for v in result.ms.values() if v is not None)
        result.ms[missing[0]] = result.window_ms - rest
        result.derived.append(f"{missing[0]} = window - the others")
    if result.window_ms is None and not missing:
        result.window_ms = sum(result.ms.values())
    return result


def gpus(table) -> list[str]:
    """GPUs with census data, the published one first; H200 is always offered (it may say 'not yet')."""
    found = sorted(table["gpu"].unique(), key=lambda g: (g != "A10G", g))
    return found + ([] if "H200" in found else ["H200"])


def measured_windows(root: Path = DATA_DIR) -> list[dict]:
    """Every stored census JSON of our captures: GPU, arm, window name, signature, top attention kernels,
    the engine steps, the reader's counts (``stats``: kernels, how many were replayed from CUDA graphs) and
    the kernel launches per family."""

    found = []
    for ds in datasets(kind="census", root=root):
        for path in sorted(ds.path.glob("*.census.json")):
            result = ds.json(path.name)
            found.append({"gpu": gpu_label(ds), "arm": ds.provenance.get("flags", {}).get("arm", ds.path.name),
                          "window": path.name.replace(".census.json", ""), "dataset": ds.name,
                          "signature": result["attention_signature"]["label"],
                          "attention_kernels": [k["name"] for k in result.get("attention_kernels", [])][:3],
                          "steps": result.get("steps", {}), "stats": result.get("stats", {}),
                          "unconfident": len(result.get("unconfident", [])),
                          "launches": {f: v.get("count") for f, v in result.get("families", {}).items()}})
    return found


def matmul_launches(root: Path = DATA_DIR, window: str = "prefill-28672"):
    """The matmul kernels of one captured window side by side per backend: launches and ms per launch.

    When the matmul totals of two backends disagree, this says whether they ran different work
    (other kernels or other counts) or the same launches at a different speed (clocks, power).
    """

    import pandas as pd

    rows = []
    for ds in datasets(kind="census", root=root):
        path = ds.path / f"{window}.census.json"
        if not path.exists():
            continue
        result = ds.json(path.name)
        backend = backend_of(ds.provenance.get("flags", {}).get("arm", ds.path.name))
        for kernel in result["top"]:
            if kernel["family"] == "matmul":
                rows.append({"gpu": gpu_label(ds), "backend": backend, "kernel": kernel["name"],
                             "launches": kernel["count"], "ms_per_launch": kernel["ms"] / kernel["count"]})
    if not rows:
        raise LabError(f"{root}: no census of window {window!r}; capture it with scripts/gpu_run.sh vllm-traces")
    table = pd.DataFrame(rows)
    wide = table.pivot_table(index=["gpu", "kernel"], columns="backend", values=["launches", "ms_per_launch"])
    wide.columns = [f"{backend}: {what.replace('_', ' ')}" for what, backend in wide.columns]
    return wide.reset_index()


def window_clocks(root: Path = DATA_DIR):
    """What the GPU's clocks did in each captured window (the ``<window>.clocks.json`` beside a trace):
    one row per (gpu, backend, window) with the sampling interval and the samples taken, the SM clock
    (first sample, median, lowest, highest), the power (median, highest), how many samples had the software
    power cap active (``power_capped``; NaN where the driver gave no reasons), how many samples one reading
    lasts (``readings_held``), the limit that was active most often and in what share of the samples, and the
    window's GPU time and matmul ms. Empty when no capture recorded clocks."""

    import pandas as pd

    rows = []
    for ds in datasets(kind="census", root=root):
        backend = backend_of(ds.provenance.get("flags", {}).get("arm", ds.path.name))
        for path in sorted(ds.path.glob("*.clocks.json")):
            name = path.name.replace(".clocks.json", "")
            clocks = ds.json(path.name)
            census_path = ds.path / f"{name}.census.json"
            census = ds.json(census_path.name) if census_path.exists() else None
            limit, share = dominant_limit(clocks)
            sm, power = clocks.get("sm_mhz") or {}, clocks.get("power_w") or {}
            capped, held = samples_with(clocks, "software power cap"), readings_held(clocks)
            first = ((clocks.get("series") or {}).get("sm_mhz") or [math.nan])[0]
            rows.append({"gpu": gpu_label(ds), "backend": backend, "window": name, "dataset": ds.name,
                         "interval_ms": clocks.get("interval_ms", math.nan), "samples": clocks.get("samples", 0),
                         "sm_mhz_first": first, "sm_mhz_median": sm.get("median", math.nan),
                         "sm_mhz_min": sm.get("min", math.nan), "sm_mhz_max": sm.get("max", math.nan),
                         "power_w_median": power.get("median", math.nan), "power_w_max": power.get("max", math.nan),
                         "power_capped": math.nan if capped is None else capped,
                         "readings_held": math.nan if held is None else held,
                         "limit": limit, "limit_share": share,
                         "window_ms": census["kernel_ms"] if census else math.nan,
                         "matmul_ms": census["families"]["matmul"]["ms"] if census else math.nan})
    return pd.DataFrame(rows, columns=CLOCK_COLUMNS)


CLOCK_COLUMNS = ("gpu", "backend", "window", "dataset", "interval_ms", "samples", "sm_mhz_first", "sm_mhz_median",
                 "sm_mhz_min", "sm_mhz_max", "power_w_median", "power_w_max", "power_capped", "readings_held",
                 "limit", "limit_share", "window_ms", "matmul_ms")


#: Where to look when a window was not captured: the same phase at another length first, then the
#: related phase (the A10G study published no decode-only window, only its whole-request one).
RELATED_PHASE = {"decode": "decode-naive", "decode-naive": "decode", "prefill": None}


def nearest_window(table, gpu: str, phase: str, tokens: int, backend: str) -> tuple[WindowCensus, bool]:
    """The window asked for, or the nearest one that is on file: (window, substituted?).

    Same GPU and backend always; the same phase at the closest length, else the related phase at
    the closest length. Returns the empty window asked for (and False) when nothing is on file.
    """
    asked = window(table, gpu, phase, tokens, backend)
    if asked.known:
        return asked, False
    for candidate_phase in (phase, RELATED_PHASE[phase]):
        if candidate_phase is None:
            continue
        for n in sorted(LENGTHS, key=lambda n: abs(n - tokens)):
            found = window(table, gpu, candidate_phase, n, backend)
            if found.known:
                return found, True
    return asked, False


def sample_interval(root: Path = DATA_DIR) -> Fact:
    """The sampling interval of the H200 captures' clock samples (one interval for all of them, or a LabError)."""
    clocks = window_clocks(root)
    intervals = set(clocks[clocks.gpu == "H200"].interval_ms.dropna())
    if len(intervals) != 1:
        raise LabError(f"the H200 captures sampled their clocks at {sorted(intervals) or 'no'} intervals; expected one")
    return SAMPLE_INTERVAL.fact(float(intervals.pop()), detail="*/<window>.clocks.json")

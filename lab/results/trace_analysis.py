"""Chapter 7's readings of the census windows, as numbers: the matmul control, the attention
factor, the clocks, attention per decode step, and how much of a whole-request "decode" window is
prefill. Pure functions over :mod:`lab.results.census_windows`; None where a window is missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lab import LabError
from lab.measure.vllm import arms
from lab.results import census_windows as cd
from lab.results.data import DATA_DIR

FLASH, FLEX = cd.BACKENDS
#: Matmul totals of two windows this close (percent) count as equal work at equal speed.
CONTROL_TOLERANCE_PCT = 2.0
LONG, SHORT = 28672, 2048


@dataclass(frozen=True)
class Control:
    """Matmul and attention of the two backends in one window kind (ms)."""

    matmul_flash: float
    matmul_flex: float
    attention_flash: float
    attention_flex: float
    share_flash: float | None
    share_flex: float | None

    @property
    def matmul_diff_pct(self) -> float:
        return 100 * abs(self.matmul_flex - self.matmul_flash) / self.matmul_flash

    @property
    def holds(self) -> bool:
        return self.matmul_diff_pct <= CONTROL_TOLERANCE_PCT

    @property
    def attention_ratio(self) -> float:
        return self.attention_flex / self.attention_flash

    @property
    def extra_attention_s(self) -> float:
        return (self.attention_flex - self.attention_flash) / 1000


def control(table, gpu: str, phase: str = "prefill", tokens: int = LONG) -> Control | None:
    fa, fx = (cd.window(table, gpu, phase, tokens, b) for b in (FLASH, FLEX))
    if None in (fa.ms["matmul"], fx.ms["matmul"], fa.ms["attention"], fx.ms["attention"]):
        return None
    return Control(fa.ms["matmul"], fx.ms["matmul"], fa.ms["attention"], fx.ms["attention"],
                   fa.share("attention"), fx.share("attention"))


def attention_pair(table, gpu: str, phase: str, tokens: int) -> tuple[float, float] | None:
    """Attention ms of (FlashAttention, FlexAttention) in one window, where both are known."""
    fa, fx = (cd.window(table, gpu, phase, tokens, b).ms["attention"] for b in (FLASH, FLEX))
    return None if fa is None or fx is None else (fa, fx)


def scaled_matmul_estimate(table, gpu: str = "A10G") -> float | None:
    """The short window's matmul time scaled linearly from the long one (matmul work ~ tokens)."""
    exact = table[(table["gpu"] == gpu) & (table["phase"] == "prefill")].groupby("nominal")["tokens"].first()
    long = cd.window(table, gpu, "prefill", LONG, FLASH).ms["matmul"]
    if long is None or SHORT not in exact or LONG not in exact:
        return None
    return float(long * exact[SHORT] / exact[LONG])


@dataclass(frozen=True)
class LaunchComparison:
    same_work: bool               # the same matmul kernels launched the same number of times
    slower_max_pct: float         # per launch, FlashAttention's window against FlexAttention's
    slower_min_pct: float
    table: object


def matmul_launch_comparison(root: Path = DATA_DIR, gpu: str = "H200", window: str = f"prefill-{LONG}"):
    try:
        launches = cd.matmul_launches(root, window=window)
    except LabError:
        return None
    launches = launches[launches.gpu == gpu]
    if launches.empty:
        return None
    fa_col, fx_col = f"{FLASH}: ms per launch", f"{FLEX}: ms per launch"
    slower = 100 * (launches[fa_col] / launches[fx_col] - 1)
    same = bool((launches[f"{FLASH}: launches"] == launches[f"{FLEX}: launches"]).all())
    return LaunchComparison(same, float(slower.max()), float(slower.min()), launches)


def decode_per_step(table, root: Path = DATA_DIR, gpu: str = "H200") -> dict | None:
    """(backend, context) -> attention and matmul ms per decode step, for both backends at 2k and 28k."""
    labels = {FLASH: arms.FA3.label, FLEX: arms.FLEX.label}
    steps = {(w["arm"], w["window"]): w["steps"].get("decode") for w in cd.measured_windows(root) if w["gpu"] == gpu}
    out = {}
    for backend, arm in labels.items():
        for n in (SHORT, LONG):
            w, count = cd.window(table, gpu, "decode", n, backend), steps.get((arm, f"decode-{n}"))
            if not (w.known and count and w.ms["attention"] is not None and w.ms["matmul"] is not None):
                return None
            out[backend, n] = {f: w.ms[f] / count for f in ("attention", "matmul")}
    return out


@dataclass(frozen=True)
class NaiveWindow:
    """A whole-request "decode" window (the study's method) against its prefill and its decode."""

    window_s: float
    prefill_kernels_s: float      # attention + matmul of the prefill window of the same prompt
    decode_s: float               # generated tokens x the sweep's ITL at that context
    attention_share: float | None

    @property
    def prefill_pct(self) -> float:
        return 100 * self.prefill_kernels_s / self.window_s

    @property
    def decode_pct(self) -> float:
        return 100 * self.decode_s / self.window_s


def naive_window(table, backend: str, itl_ms: float, tokens_generated: int = cd.REFERENCE_DECODE_WINDOW_TOKENS,
                 gpu: str = "A10G") -> NaiveWindow | None:
    naive, prefill = cd.window(table, gpu, "decode-naive", LONG, backend), cd.window(table, gpu, "prefill", LONG, backend)
    if naive.window_ms is None or prefill.ms["attention"] is None or prefill.ms["matmul"] is None:
        return None
    return NaiveWindow(naive.window_ms / 1000, (prefill.ms["attention"] + prefill.ms["matmul"]) / 1000,
                       tokens_generated * itl_ms / 1000, naive.share("attention"))


def naive_split(root: Path = DATA_DIR, gpu: str = "H200") -> list[dict]:
    """Our study-style windows split per engine step: arm, prefill and decode steps, prefill % of GPU time."""
    out = []
    for w in cd.measured_windows(root):
        if w["gpu"] != gpu or not w["window"].startswith("decode-naive"):
            continue
        by_phase = w["steps"].get("kernel_ms_by_phase", {})
        total = sum(by_phase.values())
        out.append({"arm": w["arm"], "prefill_steps": w["steps"].get("prefill", 0),
                    "decode_steps": w["steps"].get("decode", 0), "prefill_ms": by_phase.get("prefill", 0.0),
                    "total_ms": total, "prefill_pct": 100 * by_phase.get("prefill", 0.0) / total if total else None})
    return out

"""The H200's clock probe (``python -m lab clock-probe``, data/h200/clock-probe): what the power-cap flag, the SM
clock and the two power readings did through idle time, two short bursts of matrix products and a sustained run.

Chapter 7 reads it beside its capture windows, which saw the flag set at a low ``power.draw``: that reading is
NVML's one-second average, and ``power.draw.instant`` shows what the average hides. nvidia-smi refreshes each
reading only every few samples, so a time read here is good to about a tenth of a second.
"""

from __future__ import annotations

import functools
from pathlib import Path

from lab.measure.clock_probe import POWER_CAP
from lab.measure.gpuclocks import reason_names
from lab.results import data

RUN = "h200/clock-probe"
INSTANT = "power.draw.instant"
LIMIT = "enforced.power.limit"
#: How long after a burst begins its samples still belong to it: the one-second average's window.
AFTER_S = 1.0


@functools.cache
def _load(root: Path | None = None):
    """(samples with a ``capped`` column: the software power cap among the active limits, phases)."""
    ds = data.load((root or data.DATA_DIR) / RUN)
    samples = ds.csv("samples.csv", ["t", "sm_mhz", "power_w", "reasons", INSTANT, LIMIT])
    phases = ds.csv("phases.csv", ["phase", "kind", "seconds", "start", "end"])
    samples = samples.assign(capped=[POWER_CAP in reason_names(None if r != r else int(r)) for r in samples.reasons])
    return samples, phases


def _between(samples, start: float, end: float):
    return samples[(samples.t >= start) & (samples.t < end)]


def readings(root: Path | None = None) -> dict:
    """What the probe says about the power cap, in numbers:

    - ``limit_w``: the enforced power limit; ``idle_mhz``: the median SM clock of the first idle phase;
    - around the short bursts (from each burst's start to :data:`AFTER_S` later): ``burst_instant_max_w``, the
      highest instantaneous reading; ``flag_avg_lo_w`` / ``flag_avg_hi_w``, the one-second average in the
      samples with the flag set; ``burst_mhz_lo`` / ``burst_mhz_hi``, the SM clock inside the longest short burst
      while the flag was set (its readings);
    - ``sustained_w`` / ``sustained_mhz``: the median one-second average and SM clock through the sustained run;
    - ``flag_hold_s``: the longest the flag stayed set after a burst or the sustained run ended (its last flagged
      sample within :data:`AFTER_S` of the end).
    """
    samples, phases = _load(root)
    work = phases[phases.kind != "idle"]
    bursts, sustained = work[work.kind == "burst"], work[work.kind == "sustained"]
    idle = _between(samples, *phases.iloc[0][["start", "end"]])
    around = [_between(samples, b.start, b.start + AFTER_S) for b in bursts.itertuples()]
    flagged = [s[s.capped] for s in around]
    longest = bursts.loc[bursts.seconds.idxmax()]
    inside = _between(samples, longest.start, longest.end + 0.1)  # + a reading's refresh: the last one in the burst
    inside = inside[inside.capped]
    held = []  # per work phase: its end to the last flagged sample of the second after it
    for phase in work.itertuples():
        after = _between(samples, phase.end, phase.end + AFTER_S)
        if after.capped.any():
            held.append(after[after.capped].t.iloc[-1] - phase.end)
    run = _between(samples, *sustained.iloc[0][["start", "end"]])
    avg = [value for s in flagged for value in s.power_w]
    return {"limit_w": float(samples[LIMIT].median()), "idle_mhz": float(idle.sm_mhz.median()),
            "burst_instant_max_w": float(max(s[INSTANT].max() for s in around)),
            "flag_avg_lo_w": float(min(avg)), "flag_avg_hi_w": float(max(avg)),
            "burst_mhz_lo": float(inside.sm_mhz.min()), "burst_mhz_hi": float(inside.sm_mhz.max()),
            "longest_burst_ms": 1000 * float(longest.seconds),
            "sustained_w": float(run.power_w.median()), "sustained_mhz": float(run.sm_mhz.median()),
            "flag_hold_s": float(max(held))}

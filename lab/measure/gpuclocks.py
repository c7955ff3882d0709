"""What the GPU's clocks, power and temperature did while something ran (``nvidia-smi`` sampling).

Two profiler windows can launch the same kernels the same number of times and still differ in time,
if the GPU ran one of them at a lower clock (a power or thermal limit). A window's samples say
whether it did. ``nvidia-smi`` runs in the background and writes one CSV line per interval; the
sampler keeps those lines and summarises them.

    sampler = ClockSampler()
    sampler.start(); run_the_window(); sampler.stop()
    sampler.summary()  # {"samples": 31, "sm_mhz": {"median": 1980, ...}, "power_w": {...}, ...}
"""

from __future__ import annotations

import math
import os
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from lab import LabError

#: nvidia-smi query fields, in column order. The last one is dropped on drivers that lack it.
FIELDS = ("timestamp", "clocks.sm", "clocks.mem", "power.draw", "temperature.gpu", "clocks_event_reasons.active")
COLUMNS = ("timestamp", "sm_mhz", "mem_mhz", "power_w", "temp_c", "reasons")

#: The instantaneous board power beside power.draw (NVML's one-second average on Ampere and newer): what a burst
#: shorter than a second draws. Asked for as an extra field; a driver that lacks it is sampled without.
INSTANT_POWER = ("power.draw.instant",)

#: How often a timing run (the kernel benchmark, the value-dependence study) samples: a candidate timed for a few
#: hundred milliseconds still gets a dozen samples. A profiler capture keeps the sampler's default (50 ms).
TIMING_INTERVAL_MS = 20

#: Bits of clocks_event_reasons.active (nvidia-smi --help-query-gpu): why the clock is below its maximum.
REASONS = {0x1: "idle", 0x2: "application clocks setting", 0x4: "software power cap", 0x8: "hardware slowdown",
           0x10: "sync boost", 0x20: "software thermal slowdown", 0x40: "hardware thermal slowdown",
           0x80: "hardware power brake", 0x100: "display clock setting"}


def available() -> bool:
    return shutil.which("nvidia-smi") is not None


def _gpu_index() -> str:
    """The GPU this process sees first (CUDA_VISIBLE_DEVICES may renumber them)."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip()
    return first if first.isdigit() else "0"


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:  # "[N/A]", "[Not Supported]"
        return math.nan


def parse_line(line: str, extra: tuple[str, ...] = ()) -> dict | None:
    """One CSV line of nvidia-smi (noheader, nounits) as a sample; None for a line it cut off. ``extra``: query
    fields asked for after :data:`FIELDS` (numbers, kept under their field names)."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) < len(COLUMNS) - 1 or (extra and len(parts) < len(COLUMNS) + len(extra)):
        return None
    sample = {"timestamp": parts[0]}
    for name, text in zip(COLUMNS[1:5], parts[1:5], strict=True):
        sample[name] = _number(text)
    if len(parts) >= len(COLUMNS):
        try:
            sample["reasons"] = int(parts[5], 16)
        except ValueError:
            sample["reasons"] = None
    for name, text in zip(extra, parts[len(COLUMNS):], strict=False):
        sample[name] = _number(text)
    return sample


def reason_names(mask: int | None) -> list[str]:
    if not mask:
        return []
    return [name for bit, name in REASONS.items() if mask & bit] or [f"unknown ({mask:#x})"]


def summarise(samples: list[dict]) -> dict:
    """Median/min/max SM clock, mean/max power, max temperature, and how often each limit was active."""
    def stats(key):
        values = [s[key] for s in samples if not math.isnan(s[key])]
        if not values:
            return None
        return {"median": statistics.median(values), "min": min(values), "max": max(values),
                "mean": statistics.fmean(values)}

    reasons: dict[str, int] = {}
    for s in samples:
        for name in reason_names(s.get("reasons")):
            reasons[name] = reasons.get(name, 0) + 1
    return {"samples": len(samples), "first": samples[0]["timestamp"] if samples else None,
            "last": samples[-1]["timestamp"] if samples else None,
            "sm_mhz": stats("sm_mhz"), "mem_mhz": stats("mem_mhz"), "power_w": stats("power_w"),
            "temp_c": stats("temp_c"), "limits_active": reasons}


def dominant_limit(summary: dict) -> tuple[str, float]:
    """The clock limit active in most samples of a summary, and in what share of them ("none", 0.0 if none)."""
    limits, samples = summary.get("limits_active") or {}, summary.get("samples") or 0
    if not limits or not samples:
        return "none", 0.0
    name = max(limits, key=limits.get)
    return name, limits[name] / samples


def samples_with(record: dict, reason: str) -> int | None:
    """How many samples of a record (:meth:`ClockSampler.record`) had ``reason`` (a :data:`REASONS` name) active;
    None for a record without the reasons column (an older driver, or a summary without its series)."""
    masks = (record.get("series") or {}).get("reasons")
    if masks is None:
        return None
    return sum(reason in reason_names(mask) for mask in masks)


def readings_held(record: dict) -> float | None:
    """How many consecutive samples, at the median, show one reading of clock and power: nvidia-smi prints a
    line every interval, but the driver refreshes its readings less often, so a reading repeats. Times the
    interval, it is how often the readings change. None without a series."""
    series = record.get("series") or {}
    pairs = list(zip(series.get("sm_mhz") or [], series.get("power_w") or [], strict=False))
    if not pairs:
        return None
    runs, length = [], 1
    for before, after in zip(pairs, pairs[1:], strict=False):
        if after == before:
            length += 1
        else:
            runs.append(length)
            length = 1
    runs.append(length)
    inside = runs[1:-1]  # the first and last run are cut off by the window's start and end
    return float(statistics.median(inside or runs))


def row_fields(summary: dict) -> dict:
    """A summary as the four columns a timing row carries: median SM clock and power, the clock limit
    active in most samples and its share of them."""
    limit, share = dominant_limit(summary)
    return {"sm_mhz": (summary.get("sm_mhz") or {}).get("median", math.nan),
            "power_w": (summary.get("power_w") or {}).get("median", math.nan),
            "clock_limit": limit, "clock_limit_share": share}


class ClockSampler:
    """Samples the GPU every ``interval_ms`` between :meth:`start` and :meth:`stop`; ``extra`` query fields
    (``power.draw.instant``) are asked for after :data:`FIELDS` and dropped on a driver that lacks one."""

    def __init__(self, interval_ms: int = 50, gpu: str | None = None, extra: tuple[str, ...] = ()):
        if not available():
            raise LabError("nvidia-smi is not on PATH: GPU clocks cannot be sampled on this machine")
        self.interval_ms = interval_ms
        self.gpu = gpu or _gpu_index()
        self.extra = tuple(extra) if extra and self._accepts(FIELDS + tuple(extra)) else ()
        self.fields = FIELDS + self.extra if self.extra or self._accepts(FIELDS) else FIELDS[:-1]
        self._proc: subprocess.Popen | None = None
        self._file = None
        self.samples: list[dict] = []

    def _accepts(self, fields) -> bool:
        done = subprocess.run(["nvidia-smi", "-i", self.gpu, f"--query-gpu={','.join(fields)}",
                               "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=30)
        return done.returncode == 0

    @property
    def running(self) -> bool:
        return self._proc is not None

    def start(self) -> None:
        if self.running:  # never leave an nvidia-smi behind
            self.stop()
        self._file = tempfile.NamedTemporaryFile("w+", suffix=".csv", delete=False)
        self._proc = subprocess.Popen(["nvidia-smi", "-i", self.gpu, f"--query-gpu={','.join(self.fields)}",
                                       "--format=csv,noheader,nounits", f"--loop-ms={self.interval_ms}"],
                                      stdout=self._file, stderr=subprocess.DEVNULL)

    def stop(self) -> dict:
        """Stop sampling; return the summary (samples are kept in ``self.samples``)."""
        if self._proc is None:
            raise LabError("ClockSampler.stop() called before start()")
        self._proc.terminate()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        self._file.close()
        path = Path(self._file.name)
        lines = path.read_text(errors="replace").splitlines()
        self.samples = [s for s in (parse_line(line, self.extra) for line in lines) if s]
        path.unlink(missing_ok=True)
        self._proc = None
        return self.summary()

    def summary(self) -> dict:
        return {"interval_ms": self.interval_ms, "gpu": self.gpu, "fields": list(self.fields),
                **summarise(self.samples)}

    def record(self) -> dict:
        """Summary plus every sample, column-wise (small: a few hundred numbers per window)."""
        return {**self.summary(), "series": {c: [s.get(c) for s in self.samples] for c in COLUMNS + self.extra}}

"""One memory-bandwidth ceiling per GPU, and the one way this book turns a time into a read rate.

For a GPU the book measured (the H200), the ceiling is the **slope** of a read-only stream: time
against bytes over buffers from 256 MB to 4 GB (data/h200/bandwidth, ``kind=read``). Each call also
pays a fixed cost (launch, the grid filling and draining: the fit's intercept), so a single call's
bytes / time rises with its size and is no property of the GPU; the marginal rate is, and the data
shows it: the slope between any two neighbouring sizes agrees (:func:`read_ceiling` returns the
spread). A read rate of anything else -- a KV cache read by a decode step across prompt lengths, a
sweep's decode ITL -- is estimated the same way: the slope of time against bytes (:func:`slope_rate`).

For a GPU the book only reads about (the A10G of the reference study), the ceiling is its datasheet
figure, and says so. The datasheet figure of a measured GPU stays a labelled reference line, never a
floor.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.results import data, hardware
from lab.results.facts import Fact

RUNS = {"NVIDIA H200": "h200/bandwidth"}
MIN_BYTES = 256 << 20   # above L2 (60 MiB on the H200) by a wide margin


@dataclass(frozen=True)
class Ceiling:
    """A GPU's memory-bandwidth ceiling: bytes/s, how it was obtained, and (measured) the fit's spread."""

    gpu: str
    bytes_per_s: float
    method: str                      # "read-stream slope" or "datasheet"
    source: str                      # the data file, or the datasheet's citation key
    intercept_s: float | None = None  # the fixed cost per call of the read stream
    spread: float | None = None       # (max - min) / median of the neighbouring-size slopes
    datasheet_bytes_per_s: float | None = None

    def fact(self) -> Fact:
        return Fact(self.bytes_per_s, self.source)

    def floor_s(self, nbytes: float) -> float:
        """The least time ``nbytes`` of reads can take under this ceiling."""
        return nbytes / self.bytes_per_s


def slope_rate(nbytes, seconds) -> tuple[float, float]:
    """(bytes per second, intercept seconds) of the least-squares line seconds = intercept + bytes / rate."""
    import numpy as np

    x, y = np.asarray(nbytes, dtype=float), np.asarray(seconds, dtype=float)
    slope, intercept = np.polyfit(x, y, 1)
    return 1.0 / slope, float(intercept)


def read_stream(gpu: str = "NVIDIA H200", root=None):
    """The read rows of a GPU's bandwidth run (size_bytes, ms, gb_per_s, ...), or None if not on file."""
    run = RUNS.get(gpu)
    if run is None:
        return None
    folder = (root / run) if root is not None else run
    try:
        table = data.load(folder).csv("read_stream.csv", ("kind", "size_bytes", "ms", "gb_per_s"))
    except Exception:  # noqa: BLE001  (no run on file is "not measured", not an error)
        return None
    return table[table.kind == "read"].sort_values("size_bytes")


def read_ceiling(gpu: str = "NVIDIA H200", root=None) -> Ceiling:
    """The ceiling of ``gpu``: the read-stream slope where measured, else the datasheet's bandwidth."""
    spec = hardware.match_device(gpu)
    datasheet = spec.bandwidth if spec is not None else None
    table = read_stream(gpu, root)
    if table is None or len(table[table.size_bytes >= MIN_BYTES]) < 2:
        if spec is None:
            return Ceiling(gpu, float("nan"), "not measured", "lab.results.bandwidth")
        return Ceiling(gpu, spec.bandwidth, "datasheet", str(spec.sources["bandwidth"]),
                       datasheet_bytes_per_s=datasheet)
    big = table[table.size_bytes >= MIN_BYTES]
    rate, intercept = slope_rate(big.size_bytes, big.ms * 1e-3)
    points = list(zip(big.size_bytes, big.ms, strict=True))
    steps = [(b2 - b1) / ((t2 - t1) * 1e-3) for (b1, t1), (b2, t2) in zip(points, points[1:], strict=False)]
    spread = (max(steps) - min(steps)) / sorted(steps)[len(steps) // 2]
    return Ceiling(gpu, rate, "read-stream slope", f"data/{RUNS[gpu]}/read_stream.csv", intercept_s=intercept,
                   spread=spread, datasheet_bytes_per_s=datasheet)


def per_call_rates(gpu: str = "NVIDIA H200", root=None) -> list[dict]:
    """Each size's own bytes / time (read) beside the slope: why one call's rate is not the ceiling."""
    table = read_stream(gpu, root)
    return [] if table is None else [{"size_bytes": int(r.size_bytes), "ms": float(r.ms), "gb_per_s": float(r.gb_per_s)}
                                     for r in table.itertuples()]

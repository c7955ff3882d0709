"""One memory-bandwidth ceiling per GPU, and the one way this book turns a time into a read rate.

For a GPU the book measured (the H200), the ceiling is the **slope** of a read-only stream: time
against bytes over buffers from 256 MB to 4 GB (data/h200/bandwidth, ``kind=read``). Each call also
pays a fixed cost (launch, the grid filling and draining: the fit's intercept), so a single call's
bytes / time rises with its size and is no property of the GPU; the marginal rate is, and the data
must show it: the slope between any two neighbouring sizes agrees (the ceiling's ``spread``; a stream
whose slopes spread by more than :data:`FLAT_WITHIN`, or that stops short of :data:`TO_BYTES`, is
refused). A read rate of anything else -- a KV cache read by a decode step across prompt lengths, a
sweep's decode ITL -- is estimated the same way: the slope of time against bytes (:func:`slope_rate`).
While a measured GPU's stream is not on file its ceiling is *not measured*: a Fact says so, and
arithmetic on it (:func:`ceiling`) stops with a one-line error naming the file.

For a GPU the book only reads about (the A10G of the reference study), the ceiling is its datasheet
figure, and says so. The datasheet figure of a measured GPU (:func:`datasheet_bandwidth`) stays a
labelled reference, never a floor. Facts carry the quantity key ``<gpu>.bandwidth_ceiling``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

from lab import LabError
from lab.results import data, hardware, units
from lab.results.facts import Fact
from lab.results.quantities import Quantity

#: GPUs with a measured read stream: the GPU's name as CUDA reports it -> dataset folder under data/.
RUNS = {"NVIDIA H200": "h200/bandwidth"}
FILE = "read_stream.csv"
COLUMNS = ("kind", "size_bytes", "ms", "gb_per_s")
MIN_BYTES = 256 << 20   # above L2 (60 MiB on the H200) by a wide margin
#: ... and the stream must reach this far (4 GB, decimal), where an earlier copy baseline collapsed.
TO_BYTES = 4 * 10**9
#: (max - min) / median of the neighbouring-size slopes above which the stream is not one ceiling.
FLAT_WITHIN = 0.05


#: The one bandwidth ceiling of a GPU, as every page states it: measured where the book measured the GPU
#: (the read-stream slope), the datasheet's figure for a GPU it only reads about.
MEASURED_CEILING = Quantity("bandwidth_ceiling", "the GPU's memory-bandwidth ceiling: the slope of time against "
                            "bytes of a read-only stream far larger than L2", run=RUNS["NVIDIA H200"], file=FILE, unit="B/s")
CEILING_SPREAD = Quantity("bandwidth_ceiling.spread", "how far the read stream's slopes between neighbouring sizes "
                          "spread: (max - min) / median", run=RUNS["NVIDIA H200"], file=FILE, unit="%")
DATASHEET_BANDWIDTH = Quantity("datasheet.bandwidth", "a GPU's memory bandwidth on its datasheet: a reference, never "
                               "a floor", run="datasheet: lab.results.hardware", unit="B/s")
DATASHEET_CEILING = Quantity("bandwidth_ceiling.datasheet", "the memory bandwidth on the datasheet of a GPU this book "
                             "did not measure", run="datasheet: lab.results.hardware", unit="B/s")
#: The read stream behind the H200's ceiling (chapter 1 and the method appendix state its sizes).
READ_STREAM = Quantity("h200.read_stream", "the read stream behind the bandwidth ceiling: sizes timed above the "
                       "least (count, smallest, largest), the fitted fixed cost of a call, one call's bytes over "
                       "its time at the smallest and largest size", run=RUNS["NVIDIA H200"], file=FILE)
CEILING_OF_DATASHEET = Quantity("bandwidth_ceiling.pct_of_datasheet", "the measured bandwidth ceiling over the "
                                "GPU's datasheet bandwidth", run=RUNS["NVIDIA H200"], file=FILE, unit="%")


@dataclass(frozen=True)
class Ceiling:
    """A GPU's memory-bandwidth ceiling: bytes/s, how it was obtained, and (measured) the fit's spread."""

    gpu: str                          # the table key, e.g. "H200-SXM"
    bytes_per_s: float                # NaN: not measured
    method: str                       # "read-stream slope", "datasheet" or "not measured"
    source: str                       # the data file, or the datasheet's citation
    intercept_s: float | None = None  # the fixed cost per call of the read stream
    spread: float | None = None       # (max - min) / median of the neighbouring-size slopes
    datasheet_bytes_per_s: float | None = None
    sizes: tuple[int, int] | None = None  # smallest and largest size the slope is fitted over

    @property
    def measured(self) -> bool:
        return math.isfinite(self.bytes_per_s)

    def fact(self) -> Fact:
        """The ceiling as the fact every page quotes (B/s; quantity ``<gpu>.bandwidth_ceiling``)."""
        quantity = MEASURED_CEILING if self.method != "datasheet" else DATASHEET_CEILING
        fact = quantity.fact(self.bytes_per_s if self.measured else None, short_name(self.gpu))
        return dataclasses.replace(fact, source=self.source, method=f"{quantity.means}: {self._method_text()}")

    def floor_s(self, nbytes: float) -> float:
        """The least time ``nbytes`` of reads can take under this ceiling."""
        return nbytes / self.bytes_per_s

    def _method_text(self) -> str:
        if self.method != "read-stream slope":
            return {"datasheet": "datasheet: not measured by this project"}.get(self.method, self.method)
        lo, hi = (units.byte_size(s) for s in self.sizes)
        return (f"slope of time against bytes of a read-only stream, {lo} to {hi}; neighbouring-size slopes within "
                f"{100 * self.spread:.1f}%")


def _device(gpu) -> hardware.Device:
    """A table entry from a Device, its key ('H200-SXM') or a CUDA name ('NVIDIA H200')."""
    if isinstance(gpu, hardware.Device):
        return gpu
    found = hardware.DEVICES.get(gpu) or hardware.match_device(gpu)
    if found is None:
        raise LabError(f"no bandwidth ceiling for {gpu!r}: not in lab.results.hardware's table")
    return found


def short_name(gpu) -> str:
    """The GPU's part of a quantity key: 'h200', 'a10g', 'h100', 'a100-80gb', 'l4', 'rtx-4090'."""
    return _device(gpu).key.lower().removesuffix("-sxm")


def _run(dev: hardware.Device) -> str | None:
    """The dataset folder of a table GPU's read stream, or None for a GPU never measured."""
    return next((run for name, run in RUNS.items() if hardware.match_device(name) is dev), None)


def slope_rate(nbytes, seconds) -> tuple[float, float]:
    """(bytes per second, intercept seconds) of the least-squares line seconds = intercept + bytes / rate."""
    import numpy as np

    x, y = np.asarray(nbytes, dtype=float), np.asarray(seconds, dtype=float)
    slope, intercept = np.polyfit(x, y, 1)
    return 1.0 / slope, float(intercept)


def read_stream(gpu="NVIDIA H200", root: Path | None = None):
    """The read rows of a GPU's bandwidth run (size_bytes, ms, gb_per_s, ...) by size, or None when the GPU has no
    run on file (a malformed run is an error naming the file, not a missing one)."""
    run = _run(_device(gpu))
    folder = (Path(root) if root is not None else data.DATA_DIR) / run if run else None
    if folder is None or not (folder / FILE).exists():
        return None
    ds = data.load(folder)
    if ds.kind != "hardware":
        raise LabError(f"{folder}/provenance.json: kind is {ds.kind!r}; a read stream is a 'hardware' measurement")
    table = ds.csv(FILE, COLUMNS)
    return table[table.kind == "read"].sort_values("size_bytes")


def read_ceiling(gpu="NVIDIA H200", root: Path | None = None) -> Ceiling:
    """The ceiling of ``gpu``: the read-stream slope where measured (not measured while its run is not on file),
    else the datasheet's bandwidth."""
    dev = _device(gpu)
    run = _run(dev)
    if run is None:
        return Ceiling(dev.key, float(dev.bandwidth), "datasheet", f"lab.results.hardware: {dev.sources['bandwidth'].title}",
                       datasheet_bytes_per_s=float(dev.bandwidth))
    source = f"data/{run}/{FILE}"
    table = read_stream(dev, root)
    if table is None:
        return Ceiling(dev.key, math.nan, "not measured", source, datasheet_bytes_per_s=float(dev.bandwidth))
    big = table[table.size_bytes >= MIN_BYTES]
    if len(big) < 3 or big.size_bytes.max() < TO_BYTES:
        raise LabError(f"{source}: the read stream needs three or more sizes from {MIN_BYTES >> 20} MiB to at least "
                       f"{TO_BYTES / 1e9:.0f} GB to show one slope; re-measure over that range")
    rate, intercept = slope_rate(big.size_bytes, big.ms * 1e-3)
    points = list(zip(big.size_bytes, big.ms, strict=True))
    steps = [(b2 - b1) / ((t2 - t1) * 1e-3) for (b1, t1), (b2, t2) in zip(points, points[1:], strict=False)]
    spread = (max(steps) - min(steps)) / sorted(steps)[len(steps) // 2]
    if spread > FLAT_WITHIN:
        raise LabError(f"{source}: the slopes between neighbouring sizes spread by {spread:.1%} (more than "
                       f"{FLAT_WITHIN:.0%}): the stream is not one ceiling. Re-measure")
    return Ceiling(dev.key, float(rate), "read-stream slope", source, intercept_s=intercept, spread=float(spread),
                   datasheet_bytes_per_s=float(dev.bandwidth), sizes=(int(big.size_bytes.min()), int(big.size_bytes.max())))


def per_call_rates(gpu="NVIDIA H200", root: Path | None = None) -> list[dict]:
    """Each size's own bytes / time (read) beside the slope: why one call's rate is not the ceiling."""
    table = read_stream(gpu, root)
    return [] if table is None else [{"size_bytes": int(r.size_bytes), "ms": float(r.ms), "gb_per_s": float(r.gb_per_s)}
                                     for r in table.itertuples()]


# --- the ceiling as every page and every floor uses it ------------------------------------------------

def bandwidth_ceiling(gpu="NVIDIA H200", root: Path | None = None) -> Fact:
    """The GPU's memory-bandwidth ceiling in B/s, as a fact (value, source file, method, quantity)."""
    return read_ceiling(gpu, root).fact()


def ceiling(gpu="NVIDIA H200", root: Path | None = None) -> float:
    """The ceiling in B/s, for arithmetic (a floor, a "% of"); a clear error while it is not measured."""
    found = read_ceiling(gpu, root)
    if not found.measured:
        raise LabError(f"{found.source}: not measured. The {_device(gpu).name}'s bandwidth ceiling is the slope of a "
                       f"read-only stream ({', '.join(COLUMNS)}; sizes from {MIN_BYTES >> 20} MiB to "
                       f"{TO_BYTES / 1e9:.0f} GB); run `python -m lab bandwidth` on that GPU and commit it there")
    return found.bytes_per_s


def spread(gpu, root: Path | None = None) -> Fact:
    """How far the neighbouring-size slopes of the measured stream spread, in percent (None: not measured)."""
    found = read_ceiling(gpu, root)
    return CEILING_SPREAD.fact(100 * found.spread if found.spread is not None else None, short_name(gpu))


def datasheet_bandwidth(gpu) -> Fact:
    """The datasheet's bandwidth (B/s): for a measured GPU a labelled reference, never a floor."""
    dev = _device(gpu)
    fact = DATASHEET_BANDWIDTH.fact(dev.bandwidth, short_name(dev))
    return dataclasses.replace(fact, source=f"lab.results.hardware: {dev.sources['bandwidth'].title}")


def percent_of_ceiling(bytes_per_s: float | None, gpu, root: Path | None = None) -> float | None:
    """A rate as a percentage of the GPU's ceiling (None for a rate that is not measured)."""
    if bytes_per_s is None:
        return None
    return 100 * float(bytes_per_s) / ceiling(gpu, root)


def memory_ladder(gpu, root: Path | None = None) -> list[dict]:
    """:func:`lab.results.hardware.memory_hierarchy` with device memory at the GPU's bandwidth ceiling."""
    dev = _device(gpu)
    levels = hardware.memory_hierarchy(dev)
    found = read_ceiling(dev, root)
    source = (hardware.Source(f"read-only stream measured on the lent {dev.name} (lab.results.bandwidth)", found.source)
              if _run(dev) else dev.sources["bandwidth"])
    levels[-1] = {**levels[-1], "bandwidth": ceiling(dev, root), "source": source}
    return levels

"""The one memory-bandwidth ceiling of each GPU: what every floor, every "% of" and every explorer divides by.

**A GPU this project measured** (the H200): a read-only stream over buffers far larger than its L2 cache
(60 MiB), ``data/h200/bandwidth/read_stream.csv`` (``size_bytes, ms, gb_per_s, reps``; ``gb_per_s`` is the
bytes read over the median time, in decimal GB/s). The ceiling is the median ``gb_per_s`` over the sizes
of at least :data:`FROM_BYTES`, and it is a ceiling only if the stream is flat there: measured out to
:data:`TO_BYTES` and within :data:`FLAT_WITHIN` from its slowest to its fastest size. A read stream,
because what decode is judged against is a read: a kernel reads the KV cache and writes next to nothing,
while a device copy reads and writes (and one copy baseline fell to 2.77 TB/s on 1-4 GB buffers, so a
kernel "beat" it).

**A GPU this project only read about** (the A10G of the reference study, the table's others): its
datasheet bandwidth, and ``method`` says so.

A measured GPU's datasheet figure (the H200's 4.8 TB/s) is :func:`datasheet_bandwidth`: a labelled
reference, never a floor. Values are :class:`lab.results.facts.Fact` in B/s with a ``quantity`` key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lab import LabError
from lab.results import hardware, units
from lab.results.data import DATA_DIR, load
from lab.results.facts import Fact

#: GPUs with a measured ceiling: table key -> dataset folder under data/.
MEASURED = {"H200-SXM": "h200/bandwidth"}
FILE = "read_stream.csv"
COLUMNS = ("size_bytes", "ms", "gb_per_s", "reps")
#: The stream counts from here (decimal): well above the 60 MiB L2, so no size is served from cache.
FROM_BYTES = 256 * 10**6
#: ... and must reach this far, where the old copy baseline collapsed.
TO_BYTES = 4 * 10**9
#: Slowest to fastest size, as a fraction of the ceiling, that still counts as flat.
FLAT_WITHIN = 0.05
METHOD = ("median of gb_per_s over read-only streams of {lo} to {hi} (bytes read / median time), "
          "flat within {spread:.1f}%")


def _device(gpu) -> hardware.Device:
    """A table entry from a Device, its key ('H200-SXM') or a CUDA name ('NVIDIA H200')."""
    if isinstance(gpu, hardware.Device):
        return gpu
    found = hardware.match_device(gpu) if gpu not in hardware.DEVICES else hardware.DEVICES[gpu]
    if found is None:
        raise LabError(f"no bandwidth ceiling for {gpu!r}: not in lab.results.hardware's table")
    return found


def short_name(gpu) -> str:
    """The GPU's part of a quantity key: 'h200', 'a10g', 'h100', 'a100-80gb', 'l4', 'rtx-4090'."""
    return _device(gpu).key.lower().removesuffix("-sxm")


@dataclass(frozen=True)
class ReadStream:
    """The measured read stream of one GPU: the rows that count and what they say."""

    table: object        # pandas DataFrame with COLUMNS, the sizes of at least FROM_BYTES
    source: str          # data/<folder>/read_stream.csv
    ceiling: float       # B/s: the median rate over those sizes
    spread: float        # (fastest - slowest) / ceiling over those sizes

    @property
    def sizes(self) -> tuple[int, int]:
        return int(self.table["size_bytes"].min()), int(self.table["size_bytes"].max())


def read_stream(gpu, root: Path | None = None) -> ReadStream | None:
    """The read stream on file for a measured GPU, checked flat from FROM_BYTES to TO_BYTES; None when the GPU
    has none on file (a GPU without a folder in :data:`MEASURED`, or the file not written yet)."""
    folder = MEASURED.get(_device(gpu).key)
    path = Path(root or DATA_DIR) / folder / FILE if folder else None
    if path is None or not path.exists():
        return None
    ds = load(path.parent)
    if ds.kind != "hardware":
        raise LabError(f"{path.parent}/provenance.json: kind is {ds.kind!r}; a read stream is a 'hardware' measurement")
    table = ds.csv(FILE, COLUMNS)
    source = f"data/{folder}/{FILE}"
    big = table[table["size_bytes"] >= FROM_BYTES]
    if len(big) < 2 or big["size_bytes"].max() < TO_BYTES:
        raise LabError(f"{source}: the stream must be measured at two or more sizes from {FROM_BYTES / 1e6:.0f} MB "
                       f"to at least {TO_BYTES / 1e9:.0f} GB to show a flat ceiling; re-measure over that range")
    rates = big["gb_per_s"].astype(float) * 1e9
    ceiling = float(rates.median())
    spread = float((rates.max() - rates.min()) / ceiling)
    if spread > FLAT_WITHIN:
        raise LabError(f"{source}: the read stream is not flat from {FROM_BYTES / 1e6:.0f} MB up ({spread:.1%} from "
                       f"slowest to fastest, more than {FLAT_WITHIN:.0%}); its median is no ceiling. Re-measure")
    return ReadStream(big.sort_values("size_bytes").reset_index(drop=True), source, ceiling, spread)


def bandwidth_ceiling(gpu, root: Path | None = None) -> Fact:
    """The GPU's memory-bandwidth ceiling in B/s: its measured read stream, or for a GPU this project has not
    measured its datasheet figure (``method`` says which). Not measured (value None) for a measured GPU whose
    stream is not on file yet."""
    dev = _device(gpu)
    quantity = f"{short_name(dev)}.bandwidth_ceiling"
    if dev.key not in MEASURED:
        return Fact(dev.bandwidth, f"lab.results.hardware: {dev.sources['bandwidth'].title}", quantity=quantity,
                    unit="B/s", method="datasheet: not measured by this project")
    stream = read_stream(dev, root)
    if stream is None:
        return Fact(None, f"data/{MEASURED[dev.key]}/{FILE}", quantity=quantity, unit="B/s",
                    method="not measured: no read stream on file")
    lo, hi = (units.byte_size(s) for s in stream.sizes)
    return Fact(stream.ceiling, stream.source, quantity=quantity, unit="B/s",
                method=METHOD.format(lo=lo, hi=hi, spread=100 * stream.spread))


def ceiling(gpu, root: Path | None = None) -> float:
    """The ceiling in B/s, for arithmetic (a floor, a "% of"); a clear error while it is not measured."""
    fact = bandwidth_ceiling(gpu, root)
    if not fact.measured:
        raise LabError(f"{fact.source}: not measured. The {_device(gpu).name}'s bandwidth ceiling is a read-only "
                       f"stream ({', '.join(COLUMNS)}; sizes from {FROM_BYTES / 1e6:.0f} MB to {TO_BYTES / 1e9:.0f} GB)"
                       " with a provenance.json of kind 'hardware'; measure it on that GPU and commit it there")
    return float(fact.value)


def spread(gpu, root: Path | None = None) -> Fact:
    """How flat the measured stream is: slowest to fastest size over the ceiling, in percent (None: not measured)."""
    stream = read_stream(gpu, root)
    folder = MEASURED.get(_device(gpu).key)
    source = stream.source if stream else f"data/{folder}/{FILE}" if folder else "lab.results.hardware"
    return Fact(100 * stream.spread if stream else None, source, quantity=f"{short_name(gpu)}.bandwidth_ceiling_spread",
                unit="%", method="(fastest - slowest) / median over the sizes that count")


def datasheet_bandwidth(gpu) -> Fact:
    """The datasheet's bandwidth (B/s): for a measured GPU a labelled reference, never a floor."""
    dev = _device(gpu)
    return Fact(dev.bandwidth, f"lab.results.hardware: {dev.sources['bandwidth'].title}",
                quantity=f"{short_name(dev)}.datasheet_bandwidth", unit="B/s", method="datasheet")


def percent_of_ceiling(bytes_per_s: float | None, gpu, root: Path | None = None) -> float | None:
    """A rate as a percentage of the GPU's ceiling (None for a rate that is not measured)."""
    if bytes_per_s is None:
        return None
    return 100 * float(bytes_per_s) / ceiling(gpu, root)


def memory_ladder(gpu, root: Path | None = None) -> list[dict]:
    """:func:`lab.results.hardware.memory_hierarchy` with device memory at the GPU's bandwidth ceiling."""
    dev = _device(gpu)
    levels = hardware.memory_hierarchy(dev)
    fact = bandwidth_ceiling(dev, root)
    source = (hardware.Source(f"read-only stream measured on the lent {dev.name} (lab.results.bandwidth)", fact.source)
              if dev.key in MEASURED else dev.sources["bandwidth"])
    levels[-1] = {**levels[-1], "bandwidth": ceiling(dev, root), "source": source}
    return levels

"""Measured DRAM bytes of fused prefill attention (Nsight Compute), beside the two model counts.

``data/h200/dram-bytes/dram_bytes.csv`` (written on the H200 with ``ncu``: ``dram__bytes_read.sum``,
``dram__bytes_write.sum``, ``lts__t_sector_hit_rate.pct``) holds one row per candidate kernel and
prompt length. Each row is set beside :func:`lab.results.iomodel.prefill_byte_counts`: the
compulsory bytes (Q, K, V, O once: the floor) and the tile re-read count (no cache reuse: the
upper estimate). A measured count between them says how much of the re-reading the L2 cache caught.

While the file is absent every value here is "not measured" (``None`` in a :class:`Fact`), never a
made-up number.
"""

from __future__ import annotations

import math
from pathlib import Path

from lab import LabError
from lab.results import data, iomodel, units
from lab.results.facts import Fact
from lab.results.hardware import DEVICES, DTYPE_BYTES

#: Where the measurement lives under data/, and its table.
DATASET = "h200/dram-bytes"
FILE = "dram_bytes.csv"
COLUMNS = ("candidate", "n", "batch", "q_heads", "kv_heads", "head_dim", "causal", "dram_read_bytes",
           "dram_write_bytes", "l2_hit_pct", "kernel_ms", "kernels")
#: The GPU it was measured on: its shared memory sizes the model's tiles.
DEVICE = DEVICES["H200-SXM"]


def _folder(root: Path | None) -> Path:
    return (root or data.DATA_DIR) / DATASET


def load(root: Path | None = None):
    """The measured table with the two model counts beside it, or None when it is not on file.

    Adds: ``measured_bytes`` (read + write), ``compulsory_bytes``, ``reread_bytes``, ``flops``, the
    three intensities (FLOP per byte), ``achieved_flops`` (FLOP/s over ``kernel_ms``), and
    ``position``: where the measured bytes sit between the two counts on a log scale (0 = the
    compulsory floor, 1 = the re-read count).
    """
    folder = _folder(root)
    if not (folder / FILE).exists():
        return None
    table = data.load(folder).csv(FILE, COLUMNS)
    if table.empty:
        raise LabError(f"{folder / FILE}: no rows")
    block = iomodel.flash_block_size(int(table["head_dim"].iloc[0]), DEVICE.smem_per_sm, DTYPE_BYTES["bf16"])
    rows = []
    for row in table.itertuples(index=False):
        counts = iomodel.prefill_byte_counts(int(row.n), int(row.q_heads), int(row.kv_heads), int(row.head_dim), block,
                                             DTYPE_BYTES["bf16"], _flag(row.causal), int(row.batch))
        rows.append(counts)
    table["measured_bytes"] = table["dram_read_bytes"] + table["dram_write_bytes"]
    table["compulsory_bytes"] = [c["compulsory"] for c in rows]
    table["reread_bytes"] = [c["reread"] for c in rows]
    table["flops"] = [c["flops"] for c in rows]
    for kind in ("measured", "compulsory", "reread"):
        table[f"intensity_{kind}"] = table["flops"] / table[f"{kind}_bytes"]
    table["achieved_flops"] = table["flops"] / (table["kernel_ms"] * 1e-3)
    table["position"] = [_position(m, c, r) for m, c, r in
                         zip(table["measured_bytes"], table["compulsory_bytes"], table["reread_bytes"], strict=True)]
    table.attrs["block"] = block
    table.attrs["provenance"] = data.load(folder).provenance
    return table


def _flag(value) -> bool:
    if isinstance(value, str):
        if value.strip().lower() not in ("true", "false", "1", "0"):
            raise LabError(f"{DATASET}/{FILE}: causal must be True or False, got {value!r}")
        return value.strip().lower() in ("true", "1")
    return bool(value)


def _position(measured: float, floor: float, ceiling: float) -> float:
    """log(measured/floor) / log(ceiling/floor): 0 at the floor, 1 at the re-read count."""
    if measured <= 0 or floor <= 0 or ceiling <= floor:
        return math.nan
    return math.log(measured / floor) / math.log(ceiling / floor)


def row(table, candidate: str, n: int):
    """The measured row of one candidate at one length, or None."""
    if table is None:
        return None
    hit = table[(table["candidate"] == candidate) & (table["n"] == n)]
    return None if hit.empty else hit.iloc[0]


def facts(candidate: str, n: int, root: Path | None = None, prefix: str = "dram") -> dict[str, Fact]:
    """The measured bytes of one candidate at one length as Facts, already in words with their units
    (so a chapter can glue them without a format spec), "not measured yet" while the file is absent.

    Keys (after ``prefix``): _bytes (read + written, e.g. '1.23 GB'), _l2 (L2 hit rate, '87%'), _ai
    (achieved intensity, '6,200 FLOP/B'), _where ('between the two counts' or 'outside them').
    """
    source = f"data/{DATASET}/{FILE} (Nsight Compute on the H200)"
    measured = row(load(root), candidate, n)
    if measured is None:
        return {f"{prefix}_{key}": Fact(None, source) for key in ("bytes", "l2", "ai", "where")}
    between = measured["compulsory_bytes"] <= measured["measured_bytes"] <= measured["reread_bytes"]
    return {f"{prefix}_bytes": Fact(units.byte_size(float(measured["measured_bytes"])), source),
            f"{prefix}_l2": Fact(f"{float(measured['l2_hit_pct']):.0f}%", source),
            f"{prefix}_ai": Fact(f"{float(measured['intensity_measured']):,.0f} FLOP/B", source),
            f"{prefix}_where": Fact("between the two counts" if between else "outside the two counts", source)}

"""The memory hierarchy of a GPU as one figure: how much each level holds and how fast it feeds the cores."""

from __future__ import annotations

import numpy as np

from lab.book.plots import caption, color, figure
from lab.results import units
from lab.results.hardware import Device, memory_hierarchy


def _label(level: dict, dev: Device) -> str:
    """The words beside one bar: size per SM where it is per SM, and the bandwidth where it is published."""
    size = units.byte_size(level["size"])
    if level["units"] > 1:
        size += f" ({level['size_per_unit'] // 1024} KiB × {level['units']} SMs)"
    if level["bandwidth"]:
        return f"{size}, {units.byte_rate(level['bandwidth'])}"
    if level["per_clock_per_sm"]:
        return f"{size}, {level['per_clock_per_sm']} B per clock per SM"
    return f"{size}, bandwidth not published"


def plot_memory_hierarchy(devices: list[Device], source: str):
    """Horizontal bars of each level's total size (log scale), one group per level, one bar per GPU."""
    levels = [memory_hierarchy(dev) for dev in devices]
    names = [lvl["level"] if lvl["level"] != "GDDR6" else "HBM" for lvl in levels[0]]
    fig, ax = figure(figsize=(8.0, 4.2))
    height = 0.8 / len(devices)
    ys = np.arange(len(names))[::-1]
    for i, (dev, per_level) in enumerate(zip(devices, levels, strict=True)):
        offsets = ys + (len(devices) - 1 - 2 * i) * height / 2
        sizes = [lvl["size"] for lvl in per_level]
        ax.barh(offsets, sizes, height=height * 0.9, color=color(dev.key), alpha=0.8, label=dev.name)
        for y, size, lvl in zip(offsets, sizes, per_level, strict=True):
            ax.annotate(_label(lvl, dev), (size, y), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
    ax.set_yticks(ys, [n if n != "HBM" else "device memory\n(HBM / GDDR6)" for n in names])
    ax.set_xscale("log")
    ax.set_xlim(1e6, 1e14)
    ax.set_xlabel("bytes on the whole chip (log scale)")
    ax.set_title("Where a tile can live: megabytes on chip, gigabytes off it", fontsize=10)
    ax.legend(loc="upper right", fontsize=8)
    ax.grid(axis="y", visible=False)
    fig.subplots_adjust(left=0.2, bottom=0.2)
    caption(ax, source)
    return fig

"""The memory hierarchy of a GPU as one figure: how much each level holds and how fast it feeds the cores."""

from __future__ import annotations

from matplotlib.transforms import blended_transform_factory

from lab.book.plots import WIDTH_IN, caption, color, figure, floor_pt, legend_above, plain_log_axis, wrap_to_width
from lab.results import units
from lab.results.bandwidth import memory_ladder
from lab.results.hardware import Device

#: Level names as the y axis shows them (short: the axis shares a phone's width with the bars).
_LEVEL_NAMES = {"shared memory": "shared\nmemory", "L2 cache": "L2\ncache", "HBM": "device\nmemory\n(HBM /\nGDDR6)"}


def _label(level: dict, dev: Device) -> tuple[str, str]:
    """The words over one bar: size (per SM where it is per SM), and the bandwidth where it is published."""
    size = units.byte_size(level["size"])
    if level["units"] > 1:
        size += f" ({level['size_per_unit'] // 1024} KiB × {level['units']} SMs)"
    if level["bandwidth"]:
        return size, units.byte_rate(level["bandwidth"])
    if level["per_clock_per_sm"]:
        return size, f"{level['per_clock_per_sm']} B per clock per SM"
    return size, "bandwidth not published"


def _text(size: str, rate: str, fontsize: float) -> str:
    """Size and bandwidth on one line if it fits beside the level names, else on two."""
    one_line = f"{size}, {rate}"
    return one_line if wrap_to_width(one_line, fontsize, WIDTH_IN - 1.3) == one_line else f"{size},\n{rate}"


def plot_memory_hierarchy(devices: list[Device], source: str):
    """Horizontal bars of each level's total size (log scale), one group per level, one bar per GPU.

    Each bar's size and bandwidth are written on a line above it (the full width of the axes, so the
    words fit a phone); a size too long for one line puts the bandwidth on a second.
    """
    levels = [memory_ladder(dev) for dev in devices]
    names = [lvl["level"] if lvl["level"] != "GDDR6" else "HBM" for lvl in levels[0]]
    small = floor_pt(WIDTH_IN)
    texts = [[_text(*_label(lvl, dev), small) for lvl in per_level] for dev, per_level in zip(devices, levels, strict=True)]
    # one row per bar, tall enough for its words (one line or two), a gap between levels; 0.4 in per row unit
    row = 1.0 if all("\n" not in t for per_dev in texts for t in per_dev) else 1.35
    gap = 0.6
    group = len(devices) * row + gap
    fig, ax = figure(figsize=(WIDTH_IN, 2.6 + 0.4 * (len(names) * group - gap + 1.0)))
    label_at = blended_transform_factory(ax.transAxes, ax.transData)
    for i, (dev, per_level) in enumerate(zip(devices, levels, strict=True)):
        ys = [g * group + i * row for g in range(len(names))]
        ax.barh(ys, [lvl["size"] for lvl in per_level], height=0.32, color=color(dev.key), alpha=0.85, label=dev.name)
        for y, text in zip(ys, texts[i], strict=True):
            ax.text(0.01, y - 0.2, text, transform=label_at, va="bottom", ha="left", fontsize=small)
    centres = [g * group + (len(devices) - 1) * row / 2 for g in range(len(names))]
    ax.set_yticks(centres, [_LEVEL_NAMES.get(n, n) for n in names])
    ax.set_ylim(len(names) * group - gap + 0.1, 0.05 - row)   # first level on top; room for the first words
    ax.set_xscale("log")
    ax.set_xlim(1e6, 1e12)
    plain_log_axis(ax.xaxis, unit="B")
    ax.set_xlabel("bytes on the whole chip (log scale)")
    ax.tick_params(axis="y", length=0)
    fig.suptitle("Where a tile can live:\nmegabytes on chip, gigabytes off it", fontsize=11)
    legend_above(ax, ncol=1)
    ax.grid(axis="y", visible=False)
    caption(ax, source)
    return fig

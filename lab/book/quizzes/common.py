"""What several chapters' questions cite that no data file holds: device datasheet and model-shape numbers, and
the H200's bandwidth ceiling. A number a chapter measures is cited from its page module's facts
(:class:`lab.book.quiz.Cited`), never read here a second time."""

from __future__ import annotations

from lab.book.quiz import Cited, Computed
from lab.results import bandwidth, hardware
from lab.results.modelshape import qwen25_7b


def device_number(key: str, what: str, fn, fmt: str = ".0f") -> Computed:
    """A number of a device's datasheet row (lab.results.hardware), e.g. its ridge point."""
    dev = hardware.device(key)
    return Computed(f"lab.results.hardware: {dev.name} {what}", lambda: fn(dev), (), fmt)


def bandwidth_ceiling_gb_s(key: str = "H200-SXM") -> Cited:
    """A GPU's one bandwidth ceiling in GB/s (lab.results.bandwidth: the H200's read stream, else a datasheet)."""
    return Cited(bandwidth.bandwidth_ceiling(key).to("GB/s"), ",.0f")


def ridge(key: str) -> Computed:
    return device_number(key, "ridge (bf16 FLOP/s over bytes/s)", lambda d: d.ridge("bf16"))


def shape_number(what: str, fn, fmt: str = "d") -> Computed:
    """A number of Qwen2.5-7B's shape (lab.results.modelshape)."""
    return Computed(f"lab.results.modelshape: Qwen2.5-7B {what}", lambda: fn(qwen25_7b()), (), fmt)

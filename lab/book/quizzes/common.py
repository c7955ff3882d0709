"""What every chapter's questions cite: the A10G study's cells, lengths read from its tables, device and
model-shape numbers, and the H200 kernel benchmark of record (or None before it exists)."""

from __future__ import annotations

from lab.book.quiz import Cited, Computed, measured
from lab.results import bandwidth, data, hardware, kernel_runs, reference
from lab.results.modelshape import qwen25_7b
from lab.results.sweeps import FLASH, FLEX  # noqa: F401  (the A10G study's arms, named by every chapter's questions)

#: The published A10G study (vLLM 0.11, Qwen2.5-7B, bf16), parsed by ``python -m lab reference``.
A10G = reference.DATASET
#: This project's kernel benchmark on the H200 (``python -m lab bench``).
H200_KERNELS = kernel_runs.RECORD
GB = 1e9


def sweep_cell(arm: str, target_len: int, column: str, fmt: str = ".1f"):
    """One cell of the A10G sweep: ``column`` of ``arm`` at ``target_len``."""
    return measured(A10G, "sweep.csv", column, fmt, arm=arm, target_len=target_len)


def sweep_lengths() -> tuple[int, int, int]:
    """Shortest, 2k and longest target lengths of the A10G sweep (read from the table, not typed)."""
    lengths = sorted(set(data.load(A10G).csv("sweep.csv", ["target_len"])["target_len"]))
    two_k = min(lengths, key=lambda n: abs(n - 2048))
    return int(lengths[0]), int(two_k), int(lengths[-1])


def length(what: str, n: int, fmt: str = "d") -> Computed:
    """A prompt length picked from a dataset table, shown as a whole number."""
    return Computed(f"{A10G}: {what}", lambda: n, (), fmt)


def census_long_window() -> int:
    """Longest prefill window of the published census (the study's 28k window)."""
    return int(data.load(A10G).csv("census.csv", ["phase", "tokens"]).query("phase == 'prefill'")["tokens"].max())


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


def kernels_table(name: str):
    """A table of the H200 kernel benchmark, or None before it exists."""
    if not (data.DATA_DIR / H200_KERNELS / name).exists():
        return None
    return data.load(H200_KERNELS).csv(name, ["candidate", "n", "status", "ms"])

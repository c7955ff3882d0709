"""What changes when one thing about a sweep changes: the fit's own trade-off between b and c, the
prefill chunk size, and the number of GPUs one server spans (tensor parallelism).

Pure functions over the sweep table of :mod:`lab.results.sweeps`; each returns numbers (or None when
the study is not on file), never sentences.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lab.measure.vllm.arms import FA3
from lab.results import sweeps
from lab.results.fit import QuadraticFit, fit_quadratic

_SCALE = 1000.0  # tokens in thousands, as lab.results.fit does: keeps (1, n, n²) well conditioned


@dataclass(frozen=True)
class Tradeoff:
    """How b and c of one fit lean on each other.

    ``corr_bc`` is the correlation of the two estimates (from (XᵀX)⁻¹, so it depends only on the
    prompt lengths measured, not on the noise): near -1 means a slightly lower b with a slightly
    higher c fits the points almost as well. ``c_at_b`` is c refitted with b held at ``b_held``.
    """

    fit: QuadraticFit
    corr_bc: float
    b_held: float          # s per token
    c_at_b: float          # s per token², refitted with b held at b_held

    @property
    def c_shift_pct(self) -> float:
        return (self.c_at_b / self.fit.c - 1) * 100


def coefficient_correlation(lengths) -> float:
    """Correlation between the least-squares estimates of b and c for points at these lengths."""
    x = np.asarray(lengths, dtype=float) / _SCALE
    design = np.column_stack([np.ones_like(x), x, x * x])
    cov = np.linalg.inv(design.T @ design)
    return float(cov[1, 2] / math.sqrt(cov[1, 1] * cov[2, 2]))


def refit_with_b(lengths, seconds, b_held: float) -> float:
    """c (s/token²) of t - b_held·n = a + c·n², by least squares: the fit with b not free."""
    n = np.asarray(lengths, dtype=float)
    rest = np.asarray(seconds, dtype=float) - b_held * n
    design = np.column_stack([np.ones_like(n), (n / _SCALE) ** 2])
    coef, *_ = np.linalg.lstsq(design, rest, rcond=None)
    return float(coef[1] / _SCALE**2)


def tradeoff(table, study: str, arm: str, b_held: float) -> Tradeoff:
    """The fit of one arm, the correlation of its b and c, and c refitted with b held at ``b_held``."""
    rows = sweeps.fit_rows(table, study, arm)
    fit = fit_quadratic(rows["actual_len"], rows["ttft_s"])
    return Tradeoff(fit, coefficient_correlation(rows["actual_len"]), b_held,
                    refit_with_b(rows["actual_len"], rows["ttft_s"], b_held))


def _overlap(one: tuple[float, float], other: tuple[float, float]) -> bool:
    return max(one[0], other[0]) <= min(one[1], other[1])


@dataclass(frozen=True)
class ChunkComparison:
    """The same arm fitted at two prefill chunk sizes: which of a, b, c moved beyond its interval."""

    small_chunk: int
    large_chunk: int
    small: QuadraticFit
    large: QuadraticFit

    def moved(self, coefficient: str) -> bool:
        """True when the two 95% intervals of ``a``, ``b`` or ``c`` do not overlap."""
        return not _overlap(getattr(self.small, f"{coefficient}_ci"), getattr(self.large, f"{coefficient}_ci"))

    def ratio(self, coefficient: str) -> float:
        """small-chunk value over large-chunk value."""
        return getattr(self.small, coefficient) / getattr(self.large, coefficient)


def chunk_comparison(table, gpu: str = "H200", arm: str = FA3.label) -> ChunkComparison | None:
    """The arm fitted at the smallest and the largest chunk size measured on ``gpu`` (one GPU per server), both over
    the lengths both studies fit (like for like), or None while fewer than two chunk sizes share 4+ lengths."""
    studies = {}
    for study in table["study"].unique():
        rows = sweeps.fit_rows(table, study, arm)
        if (study.startswith("local/") or rows.empty or gpu.lower() not in str(rows["gpu"].iloc[0]).lower()
                or sweeps.gpu_count(table, study) != 1 or rows["actual_len"].nunique() < 4):
            continue
        chunk = sweeps.chunk_size(table, study)
        if chunk is not None and chunk not in studies:
            studies[chunk] = (study, set(rows["target_len"].astype(int)))
    if len(studies) < 2:
        return None
    small, large = min(studies), max(studies)
    shared = studies[small][1] & studies[large][1]
    if len(shared) < 4:
        return None
    return ChunkComparison(small, large, sweeps.prefill_fit(table, studies[small][0], arm, shared),
                           sweeps.prefill_fit(table, studies[large][0], arm, shared))


@dataclass(frozen=True)
class TensorParallel:
    """One arm on one GPU against the same arm with the model split over ``gpus`` GPUs."""

    gpus: int
    lengths: list[int]            # prompt lengths both measured
    ttft_one: list[float]         # s
    ttft_split: list[float]       # s
    itl_one: list[float]          # ms
    itl_split: list[float]        # ms
    decode_floor_one_ms: list[float]
    decode_floor_split_ms: list[float]

    def itl_overhead_ms(self) -> list[float]:
        """Split ITL minus the split floor, less the same for one GPU: the time the split adds beyond
        halving the bytes (communication, synchronisation, per-GPU kernels too small to fill the chip)."""
        return [(s - fs) - (o - fo) for s, fs, o, fo in zip(self.itl_split, self.decode_floor_split_ms,
                                                            self.itl_one, self.decode_floor_one_ms, strict=True)]


def tensor_parallel(table, gpu: str = "H200", arm: str = FA3.label) -> TensorParallel | None:
    """The arm measured on one GPU and over several (the tensor-parallel study), or None when either is missing."""
    split_study = next((s for s in table["study"].unique() if sweeps.gpu_count(table, s) > 1
                        and not s.startswith("local/") and gpu.lower() in str(sweeps.provenance(table, s)["gpu"]).lower()
                        and arm in set(table.loc[table["study"] == s, "arm"])), None)
    one_study = sweeps.find_study(table, gpu)
    if split_study is None or one_study is None:
        return None
    one = sweeps.arm_rows(table, one_study, arm).dropna(subset=["ttft_s"]).set_index("target_len")
    split = sweeps.arm_rows(table, split_study, arm).dropna(subset=["ttft_s"]).set_index("target_len")
    common = sorted(set(one.index) & set(split.index))
    if not common:
        return None
    gpus = sweeps.gpu_count(table, split_study)
    name = str(split["gpu"].iloc[0])
    actual = [int(one.loc[n, "actual_len"]) for n in common]
    floor_one, floor_split = sweeps.floors(name, actual), sweeps.floors(name, actual, gpus)
    index = {int(n): i for i, n in enumerate(floor_one["n"])}
    return TensorParallel(
        gpus=gpus, lengths=[int(n) for n in common],
        ttft_one=[float(one.loc[n, "ttft_s"]) for n in common], ttft_split=[float(split.loc[n, "ttft_s"]) for n in common],
        itl_one=[float(one.loc[n, "itl_ms"]) for n in common], itl_split=[float(split.loc[n, "itl_ms"]) for n in common],
        decode_floor_one_ms=[float(floor_one["decode_s"][index[n]] * 1e3) for n in actual],
        decode_floor_split_ms=[float(floor_split["decode_s"][index[n]] * 1e3) for n in actual])

"""Fit prefill time against prompt length: t(n) = a + b·n + c·n², with confidence intervals.

``b`` is the cost of each prompt token that does not depend on the others (the weight matmuls),
``c`` the cost that grows with the prompt (attention reads every earlier token), ``a`` the fixed
overhead. The quadratic share at length n, c·n² / (b·n + c·n²), says how much of the
length-dependent prefill time the quadratic term explains (the intercept is left out, as the
reference study defines it). Decode growth compares the inter-token latency at the shortest and
the longest context.

``python -m lab fit DATASET`` prints the fit of every arm of a dataset that has a sweep.csv.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lab import LabError
from lab.cli import text_arg
from lab.results.data import SWEEP_COLUMNS, load

# Fitting in thousands of tokens keeps the normal equations well conditioned (n² reaches 1e10).
_SCALE = 1000.0


@dataclass(frozen=True)
class QuadraticFit:
    """t = a + b·n + c·n² in seconds and tokens, with two-sided confidence intervals."""

    a: float                          # s
    b: float                          # s per token
    c: float                          # s per token²
    a_ci: tuple[float, float]
    b_ci: tuple[float, float]
    c_ci: tuple[float, float]
    points: int
    rms_residual_s: float
    confidence: float = 0.95

    @property
    def b_us_per_token(self) -> float:
        return self.b * 1e6

    @property
    def c_ps_per_token2(self) -> float:
        return self.c * 1e12

    def predict(self, n):
        """Predicted prefill time (s) at prompt length n (a number or an array)."""
        return _scalar_or_array(lambda x: self.a + self.b * x + self.c * x * x, n)

    def quad_share(self, n):
        """c·n² / (b·n + c·n²): the fraction of the length-dependent time in the quadratic term."""
        return _scalar_or_array(lambda x: self.c * x / (self.b + self.c * x), n)

    def summary(self) -> str:
        pct = int(round(self.confidence * 100))
        def ci(lo, hi, scale, digits):
            return f"[{lo * scale:.{digits}f}, {hi * scale:.{digits}f}]"
        return (f"t = {self.a:.4f} s + {self.b_us_per_token:.1f} us*n + {self.c_ps_per_token2:.1f} ps*n^2   "
                f"({pct}% CI: a {ci(*self.a_ci, 1, 4)} s, b {ci(*self.b_ci, 1e6, 1)} us, "
                f"c {ci(*self.c_ci, 1e12, 1)} ps; {self.points} points, rms residual {self.rms_residual_s * 1e3:.1f} ms)")


def _scalar_or_array(fn, n):
    """Apply ``fn`` to a number (returning a float) or to an array-like (returning an array)."""
    values = fn(np.asarray(n, dtype=float))
    return float(values) if np.ndim(values) == 0 else values


def fit_quadratic(lengths, seconds, confidence: float = 0.95) -> QuadraticFit:
    """Ordinary least squares of ``seconds`` on (1, n, n²); points with a missing value are dropped.

    The intervals use Student's t with (points - 3) degrees of freedom; with exactly three
    points the curve passes through them and the intervals are undefined (NaN).
    """
    if not 0 < confidence < 1:
        raise LabError(f"confidence must be between 0 and 1, got {confidence}")
    n = np.asarray(lengths, dtype=float)
    t = np.asarray(seconds, dtype=float)
    if n.shape != t.shape:
        raise LabError(f"lengths and times differ in size ({n.size} vs {t.size})")
    keep = np.isfinite(n) & np.isfinite(t)
    n, t = n[keep], t[keep]
    if len(np.unique(n)) < 3:
        raise LabError(f"a quadratic fit needs at least 3 distinct prompt lengths, got {len(np.unique(n))}")
    x = n / _SCALE
    design = np.column_stack([np.ones_like(x), x, x * x])
    coef, *_ = np.linalg.lstsq(design, t, rcond=None)
    residuals = t - design @ coef
    dof = len(t) - 3
    if dof > 0:
        from scipy import stats

        sigma2 = float(residuals @ residuals) / dof
        cov = sigma2 * np.linalg.inv(design.T @ design)
        half = stats.t.ppf(0.5 + confidence / 2, dof) * np.sqrt(np.diag(cov))
    else:
        half = np.full(3, math.nan)
    unscale = np.array([1.0, 1 / _SCALE, 1 / _SCALE**2])
    coef, half = coef * unscale, half * unscale
    return QuadraticFit(
        a=float(coef[0]), b=float(coef[1]), c=float(coef[2]),
        a_ci=(float(coef[0] - half[0]), float(coef[0] + half[0])),
        b_ci=(float(coef[1] - half[1]), float(coef[1] + half[1])),
        c_ci=(float(coef[2] - half[2]), float(coef[2] + half[2])),
        points=int(len(t)), rms_residual_s=float(np.sqrt(np.mean(residuals**2))), confidence=confidence)


@dataclass(frozen=True)
class DecodeGrowth:
    """Inter-token latency at the shortest and at the longest context of a sweep."""

    short_len: int
    short_itl_ms: float
    long_len: int
    long_itl_ms: float

    @property
    def growth_pct(self) -> float:
        return (self.long_itl_ms / self.short_itl_ms - 1) * 100


def decode_growth(lengths, itl_ms) -> DecodeGrowth:
    """Compare ITL at the shortest and the longest length that has a measurement."""
    pairs = sorted((float(n), float(v)) for n, v in zip(lengths, itl_ms, strict=True)
                   if v is not None and math.isfinite(float(v)) and math.isfinite(float(n)))
    if len(pairs) < 2:
        raise LabError("decode growth needs ITL measurements at two or more lengths")
    (n0, v0), (n1, v1) = pairs[0], pairs[-1]
    return DecodeGrowth(int(n0), v0, int(n1), v1)


def ok_rows(table):
    """Rows of a sweep table that hold a measurement (a failed length has status 'error' and no numbers)."""
    if "status" in table.columns:
        table = table[table["status"].fillna("ok").isin(["ok", "partial"])]
    return table.dropna(subset=["actual_len", "ttft_s"])


def shared_lengths(table) -> set[int]:
    """The prompt lengths (``target_len``) every arm of one study's sweep table measured, among arms with 3 or more:
    the lengths its fits share. A fit's c depends on the lengths it covers (attention's cost per pair of tokens is
    not the same at every length), so arms are fitted over the same lengths or not compared."""
    sets = [set(rows["target_len"].astype(int)) for _, rows in ok_rows(table).groupby("arm", sort=False)
            if rows["actual_len"].nunique() >= 3]
    return set.intersection(*sets) if sets else set()


def fit_arms(table, confidence: float = 0.95) -> dict[str, tuple[QuadraticFit, DecodeGrowth | None]]:
    """Fit every arm of one study's sweep table (columns arm, target_len, actual_len, ttft_s, itl_ms) over the
    lengths all its arms share (:func:`shared_lengths`): arm -> (fit, growth); decode growth over each arm's own."""
    fits, shared = {}, shared_lengths(table)
    for arm, rows in ok_rows(table).groupby("arm", sort=False):
        fitted = rows[rows["target_len"].isin(shared)]
        if fitted["actual_len"].nunique() < 3:
            continue
        fit = fit_quadratic(fitted["actual_len"], fitted["ttft_s"], confidence)
        with_itl = rows.dropna(subset=["itl_ms"])
        growth = decode_growth(with_itl["actual_len"], with_itl["itl_ms"]) if len(with_itl) >= 2 else None
        fits[arm] = (fit, growth)
    return fits


# --- CLI -----------------------------------------------------------------------------------------

def add_arguments(parser) -> None:
    parser.add_argument("dataset", type=text_arg, help="dataset name under data/ or a folder with sweep.csv "
                                        "(e.g. reference/a10g-vllm0.11-qwen2.5-7b)")
    parser.add_argument("--arm", help="only this arm (e.g. FLASH_ATTN/FA3)")
    parser.add_argument("--at", default="2048,8192,32768", help="lengths for the quadratic share (default 2048,8192,32768)")
    parser.add_argument("--confidence", type=float, default=0.95, help="confidence level of the intervals (default 0.95)")


def _lengths(text: str) -> list[int]:
    try:
        at = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise LabError(f"--at {text!r}: expected comma-separated token counts") from None
    if not at or min(at) <= 0:
        raise LabError(f"--at {text!r}: expected positive token counts")
    return at


def _numeric(table, columns, where):
    """``table`` with ``columns`` as numbers; a cell that is not a number is a LabError naming it."""
    import pandas as pd

    table = table.copy()
    for column in columns:
        values = pd.to_numeric(table[column], errors="coerce")
        bad = values.isna() & table[column].notna()
        if bad.any():
            row = int(bad.to_numpy().nonzero()[0][0])
            raise LabError(f"{where}: column '{column}', row {row + 1}: {table[column].iloc[row]!r} is not a number")
        table[column] = values
    return table


def main(args) -> int:
    if not 0 < args.confidence < 1:      # also refuses nan
        raise LabError(f"--confidence {args.confidence}: expected a level between 0 and 1, e.g. 0.95")
    at = _lengths(args.at)
    dataset = load(args.dataset)
    table = _numeric(dataset.csv("sweep.csv", SWEEP_COLUMNS), ("target_len", "actual_len", "ttft_s", "itl_ms"),
                     dataset.file("sweep.csv"))
    if args.arm:
        if args.arm not in set(table["arm"]):
            raise LabError(f"{dataset.name}: no arm {args.arm!r}; arms: {', '.join(sorted(set(table['arm'].astype(str))))}")
        table = table[table["arm"] == args.arm]
    fits = fit_arms(table, args.confidence)
    if not fits:
        raise LabError(f"{dataset.file('sweep.csv')}: no arm has 3 measured lengths that every arm measured (the table "
                       "is empty, every length failed, or the arms ran different lengths; fit one with --arm)")
    print(f"{dataset.name}  ({dataset.gpu}, vLLM {dataset.provenance.get('vllm') or '-'})")
    for arm, (fit, growth) in fits.items():
        print(f"{arm}\n  prefill fit: {fit.summary()}")
        print("  quad share: " + ", ".join(f"{fit.quad_share(n) * 100:.1f}% @ {n}" for n in at))
        if growth is not None:
            print(f"  decode ITL: {growth.short_itl_ms:.1f} ms @ {growth.short_len} -> {growth.long_itl_ms:.1f} ms "
                  f"@ {growth.long_len} ({growth.growth_pct:+.0f}%)")
    return 0

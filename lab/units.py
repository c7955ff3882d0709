"""Rates and sizes in units that scale: 693 TFLOP/s rather than 693,397.3 GFLOP/s, 4.25 TB/s rather than 4,249 GB/s.

Every measured rate the book and the commands print goes through these, so a laptop CPU reads in GFLOP/s
and an H200 in TFLOP/s (core, so ``lab.measure`` prints with them as well; ``lab.results.units`` re-exports). Decimal (SI) prefixes throughout, as datasheets use for FLOP/s and bandwidth.
"""

from __future__ import annotations

import math

from lab import LabError

#: SI prefixes from the largest down, each with the factor it stands for (the last: none).
SI_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))


def scaled(value: float, unit: str, digits: int = 3) -> str:
    """``value`` with the largest SI prefix that keeps it at or above 1, to ``digits`` significant digits.

    scaled(6.93e14, "FLOP/s") -> '693 TFLOP/s'; scaled(4.249e12, "B/s") -> '4.25 TB/s'.
    """
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise LabError(f"cannot scale {value!r}: expected a finite number")
    if value < 0:
        return "-" + scaled(-value, unit, digits)
    factor, prefix = next(((f, p) for f, p in SI_PREFIXES if value >= f), (1.0, ""))
    number = value / factor
    decimals = max(0, digits - 1 - int(math.floor(math.log10(number)))) if number > 0 else 0
    text = f"{number:,.{decimals}f}"
    if float(text.replace(",", "")) >= 1000 and prefix != "P":  # rounding carried it to the next prefix
        return scaled(round(number, decimals) * factor, unit, digits)
    return f"{text} {prefix}{unit}"


def flops_rate(flops_per_s: float, digits: int = 3) -> str:
    """A compute rate: '706 TFLOP/s', '131 GFLOP/s'."""
    return scaled(float(flops_per_s), "FLOP/s", digits)


def byte_rate(bytes_per_s: float, digits: int = 3) -> str:
    """A bandwidth: '4.25 TB/s', '19.6 GB/s'."""
    return scaled(float(bytes_per_s), "B/s", digits)


def byte_size(n_bytes: float, digits: int = 3) -> str:
    """An amount of memory traffic or storage, decimal: '60.4 GB', '537 MB'."""
    return scaled(float(n_bytes), "B", digits)


#: Superscript digits and minus, for a power of ten as a reader writes it.
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def power_of_ten(value: float, digits: int = 2) -> str:
    """A very small or large number as a table shows it to a reader, not as Python prints it:
    power_of_ten(4.768372e-07) -> '4.8 × 10⁻⁷' (not '4.768372e-07'); 0 -> '0'."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise LabError(f"cannot write {value!r} as a power of ten: expected a finite number")
    if value == 0:
        return "0"
    mantissa, exponent = f"{value:.{digits - 1}e}".split("e")
    return f"{mantissa} × 10{str(int(exponent)).translate(_SUPERSCRIPT)}"

"""Does a kernel's time depend on the values in its inputs, or only on their shapes?

The H200 run (``data/h200/value-dependence/values.csv``) times the same operations on random
inputs, on zeros and on small-magnitude inputs, with the SM clock, the power and the clock limit
the driver reported meanwhile. On a power-capped GPU the values can matter indirectly: toggling
fewer bits draws less power, which can leave the clock higher. Returns numbers or None.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from lab.results.data import DATA_DIR, load

DATASET = "h200/value-dependence"
FILE = "values.csv"
COLUMNS = ("op", "inputs", "ms", "ms_rounds", "sm_mhz", "power_w", "clock_limit")
BASELINE = "random"


@dataclass(frozen=True)
class ValueRow:
    op: str
    inputs: str
    ms: float
    sm_mhz: float | None
    power_w: float | None
    clock_limit: str
    vs_random_pct: float | None   # (ms / ms on random inputs - 1) x 100


@dataclass(frozen=True)
class ValueDependence:
    rows: list[ValueRow]
    source: str

    def ops(self) -> list[str]:
        return list(dict.fromkeys(r.op for r in self.rows))

    def get(self, op: str, inputs: str) -> ValueRow | None:
        return next((r for r in self.rows if r.op == op and r.inputs == inputs), None)

    def largest_change_pct(self, op: str | None = None) -> float | None:
        """The largest |time change| against random inputs, over every input kind (and op)."""
        changes = [abs(r.vs_random_pct) for r in self.rows
                   if r.vs_random_pct is not None and r.inputs != BASELINE and (op is None or r.op == op)]
        return max(changes) if changes else None

    def power_range(self, op: str) -> tuple[float, float] | None:
        watts = [r.power_w for r in self.rows if r.op == op and r.power_w is not None]
        return (min(watts), max(watts)) if watts else None

    def table(self):
        import pandas as pd

        return pd.DataFrame([r.__dict__ for r in self.rows])


def _number(value) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def read(root: Path = DATA_DIR) -> ValueDependence | None:
    """The measurement on file, or None while it is not committed."""
    folder = Path(root) / DATASET
    if not (folder / FILE).exists() or not (folder / "provenance.json").exists():
        return None
    table = load(folder).csv(FILE, COLUMNS)
    base = {r.op: _number(r.ms) for r in table.itertuples() if r.inputs == BASELINE}
    rows = []
    for r in table.itertuples():
        ms, ref = _number(r.ms), base.get(r.op)
        if ms is None:
            continue
        rows.append(ValueRow(str(r.op), str(r.inputs), ms, _number(r.sm_mhz), _number(r.power_w),
                             str(r.clock_limit) if isinstance(r.clock_limit, str) else "none",
                             (ms / ref - 1) * 100 if ref else None))
    return ValueDependence(rows, f"data/{DATASET}/{FILE}") if rows else None

"""Decode attention against query rows per KV head (``python -m lab decode-rows``, data/h200/decode-rows*).

Every cached K/V byte serves each query row that reads it: the query heads of its group times the query
tokens of the step. The sweep holds the cache fixed (batch 8, 32k tokens, 4 KV heads) and raises the rows,
so its arithmetic intensity is about ``rows`` FLOP per byte; the points sit on the H200's roofline between
its measured read ceiling and matmul rate (:func:`lab.results.roofline.measured_roof`). Three candidates: our split-KV kernel and FA3 (vLLM's ``vllm_flash_attn``) with one
query token and ``rows`` query heads per KV head, and FA3 with a group of 7 and ``query_tokens`` tokens per
sequence (``fa3-tokens``: a speculative step's verification).

The first run is the run of record; the second only adds the points the first could not take (``extra``).
"""

from __future__ import annotations

from pathlib import Path

from lab import LabError
from lab.results import data, roofline

RUNS = ("h200/decode-rows", "h200/decode-rows-extra")
COLUMNS = ("candidate", "rows", "batch", "context", "q_heads", "query_tokens", "ms", "flops", "bytes",
           "intensity", "tflops", "gb_per_s", "status", "note")
#: A point is still on the memory floor while its time is within this share of the candidate's fastest point.
FLAT = 0.10


def sweep(root: Path | None = None):
    """Every timed point (status ok) of the runs, the first run's point where both have one, with ``run`` (the
    folder under data/) and ``timer`` ('graph replay', or 'eager' where the note says so) added."""
    import pandas as pd

    root = root or data.DATA_DIR
    parts = []
    for run in RUNS:
        try:
            table = data.load(root / run).csv("rows.csv", COLUMNS)
        except LabError:
            if run == RUNS[0]:
                raise
            continue
        ok = table[table.status == "ok"].copy()
        ok["run"] = run
        ok["timer"] = ["eager" if "eager" in str(note) else "graph replay" for note in ok.note]
        parts.append(ok)
    both = pd.concat(parts, ignore_index=True).drop_duplicates(["candidate", "rows"], keep="first")
    if both.empty:
        raise LabError(f"data/{RUNS[0]}/rows.csv has no timed point; run `python -m lab decode-rows` on a GPU")
    return both.sort_values(["candidate", "rows"]).reset_index(drop=True)


def roof(root: Path | None = None) -> roofline.Roof:
    """The measured roofline the sweep is placed under: :func:`lab.results.roofline.measured_roof` (the H200's
    matmul rate over its read ceiling; their ratio is the measured ridge)."""
    return roofline.measured_roof(root)


def crossings(points, roof_: roofline.Roof, flat: float = FLAT):
    """Where each candidate leaves the memory floor: one row per candidate with ``last_flat`` (the most rows
    whose time is within ``flat`` of its fastest point) and ``first_off`` (the next rows measured, None if
    none), and at its fewest and most rows the share of the read ceiling and of the matmul rate reached."""
    import pandas as pd

    rows = []
    for name, mine in points.groupby("candidate", sort=False):
        mine = mine.sort_values("rows")
        fastest = float(mine.ms.min())
        flat_rows = [int(r) for r, ms in zip(mine.rows, mine.ms, strict=True) if ms <= fastest * (1 + flat)]
        last_flat = max(flat_rows)
        later = mine[mine.rows > last_flat]
        first, last = mine.iloc[0], mine.iloc[-1]
        rows.append({"candidate": name, "last_flat": last_flat,
                     "first_off": int(later.rows.iloc[0]) if len(later) else None,
                     "fewest_rows": int(first.rows), "fewest_pct_of_read": 100 * first.gb_per_s * 1e9 / roof_.bandwidth,
                     "most_rows": int(last.rows), "most_tflops": float(last.tflops),
                     "most_pct_of_matmul": 100 * last.tflops * 1e12 / roof_.peak_flops,
                     "most_ms_over_floor": float(last.ms) * 1e-3 / roofline.Kernel(name, last.flops, last.bytes).time(roof_)})
    return pd.DataFrame(rows)

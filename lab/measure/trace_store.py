"""Keeping a captured trace: gzipped, trimmed to what the census reads when over a size limit, its census beside it.

``python -m lab capture`` stores every window through :func:`keep_trace`; ``python -m lab capture trim``
is :func:`trim_trace`. The census of a trimmed file equals the census of the original.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
import shutil
from pathlib import Path

from lab import LabError
from lab.folders import check_output
from lab.measure import census as cz
from lab.store import write_atomic, write_json_atomic

#: Per-trace size limit for committing a trace; above it the trace is trimmed.
MAX_TRACE_MB = 5.0


def trim_trace(src: Path, dst: Path) -> dict:
    """Write only the events the census reads (same census, a fraction of the size); returns counts.

    ``dst`` is written through a temporary file: a source that cannot be read leaves it as it was.
    """

    src, dst = Path(src), Path(dst)
    check_output(dst, "--out", [("the trace being trimmed", src)])
    counts = {"kept": 0, "dropped": 0}

    def write(tmp: Path) -> None:
        with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=9) as out:
            out.write('{"traceName": "trimmed by lab.measure.capture: kernels, launches, classifying CPU ops and '
                      'step annotations only; open the original for the full timeline",\n"traceEvents": [\n')
            for ev in cz.iter_events(src):
                if not (cz.read_by_census(ev) or ev.get("ph") == "M"):  # metadata keeps the viewer's thread names
                    counts["dropped"] += 1
                    continue
                out.write(("" if not counts["kept"] else ",\n") + json.dumps(_slim(ev), separators=(",", ":")))
                counts["kept"] += 1
            out.write("\n]}\n")
    write_atomic(dst, write)
    return counts


def _slim(ev: dict) -> dict:
    """A kernel event with only what the census (and a viewer's tooltip) reads: name, ts, dur, ids, launch shape."""
    if ev.get("cat") != "kernel":
        return ev
    args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
    slim = {k: ev[k] for k in ("ph", "cat", "name", "pid", "tid", "ts", "dur") if k in ev}
    slim["args"] = {k: args[k] for k in ("correlation", "External id", "stream", "grid", "block") if k in args}
    return slim


def keep_trace(raw: Path, dest: Path, *, phase: str = "all", max_mb: float = MAX_TRACE_MB) -> dict:
    """Store ``raw`` as ``dest`` (gzipped, trimmed if over ``max_mb``), write its census beside it.

    Returns a summary row. The census is computed on the stored file, so it reproduces exactly.
    """

    with open(raw, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"

    def copy(tmp: Path) -> None:          # through a temporary file: a crash keeps an earlier capture whole
        if gz:
            shutil.copyfile(raw, tmp)
            return
        with open(raw, "rb") as src, gzip.open(tmp, "wb", compresslevel=6) as out:
            shutil.copyfileobj(src, out, 1 << 20)
    write_atomic(dest, copy)
    original_bytes = dest.stat().st_size
    trimmed = None
    if original_bytes > max_mb * 1e6:
        full = dest.with_name(dest.name + ".full")
        os.replace(dest, full)
        try:
            trimmed = trim_trace(full, dest)
        except BaseException:
            os.replace(full, dest)       # a failed trim keeps the whole trace
            raise
        full.unlink()
    kept_bytes = dest.stat().st_size
    stored = dest
    if kept_bytes > max_mb * 1e6:
        trimmed = {**(trimmed or {}), "trace_dropped": True}
    try:
        result = cz.census(dest, phase=phase)
    except LabError as exc:
        if phase == "all":
            raise
        result = cz.census(dest)              # no step annotations: the whole window, said so
        result["phase_note"] = f"asked for {phase} steps only, but: {exc}"
    result["trace"] = dest.name
    result["capture"] = {"original_gz_bytes": original_bytes, "stored_gz_bytes": kept_bytes, "trimmed": trimmed}
    write_json_atomic(dest.with_name(dest.name.replace(".trace.json.gz", "") + ".census.json"), result)
    if trimmed and trimmed.get("trace_dropped"):
        dest.unlink()        # still over the limit after trimming: keep the census JSON only
        stored = None
    return {"census": result, "trace": stored}


def census_rows(result: dict, phase: str, tokens: int, arm: str) -> list[dict]:
    """Long-format rows (phase, tokens, arm, metric, value, unit) like the reference ``census.csv``."""
    rows = [{"phase": phase, "tokens": tokens, "arm": arm, "metric": "window_ms", "value": result["kernel_ms"],
             "unit": "ms"}]
    for fam, f in result["families"].items():
        rows.append({"phase": phase, "tokens": tokens, "arm": arm, "metric": f"{fam}_ms", "value": f["ms"],
                     "unit": "ms"})
        rows.append({"phase": phase, "tokens": tokens, "arm": arm, "metric": f"{fam}_share_pct",
                     "value": 100 * f["share"], "unit": "%"})
    for p, ms in result["steps"].get("kernel_ms_by_phase", {}).items():
        rows.append({"phase": phase, "tokens": tokens, "arm": arm, "metric": f"steps_{p.replace(' ', '_')}_ms",
                     "value": ms, "unit": "ms"})
    return rows


def write_rows(path: Path, rows: list[dict]) -> Path:
    """Write census rows as CSV through a temporary file (plain csv: the GPU box may lack pandas)."""
    def write(tmp: Path) -> None:
        with open(tmp, "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=["phase", "tokens", "arm", "metric", "value", "unit"])
            writer.writeheader()
            writer.writerows(rows)
    return write_atomic(path, write)



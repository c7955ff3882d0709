"""What Nsight Compute (``ncu``) prints, read without a GPU: a metric's value in base units, the kernels of
its raw page, the calls between marker kernels, and a stored kernel-counters run matched job by job.

The measuring commands (:mod:`lab.measure.kernel_counters`, :mod:`lab.measure.dram_bytes`) write ncu's output;
:mod:`lab.results.kernel_counters` reads a stored run through this module alone, so reading counters does not
load the code that profiles kernels.

A *job* is one kernel call at one shape, named ``phase:candidate:batch:n`` (``prefill:fa3:1:16384``).
"""

from __future__ import annotations

import csv
import io
import math
import re

from lab import LabError

PHASES = ("prefill", "decode", "flexdecode", "backward", "chunk", "mixed")
#: A server's prefill chunk (the sweeps' --max-num-batched-tokens): a ``chunk`` job runs the last one of its prompt.
CHUNK = 8192
#: The new prompts beside a ``mixed`` job's decoding sequences: (prompts, tokens each), chapter 6b's load's prompts.
MIXED_PROMPTS = (7, 1024)
#: The name of the kernel-counters run's marker kernel: each launch of it starts the next call's kernels.
MARKER = "counters_marker"
#: ncu prints SI prefixes (Kbyte = 1000 bytes) unless told otherwise; binary ones are accepted too.
UNIT_SCALE = {"byte": 1, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
              "kibyte": 2**10, "mibyte": 2**20, "gibyte": 2**30, "kib": 2**10, "mib": 2**20, "gib": 2**30,
              "nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0,
              "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "%": 1, "sector": 1, "": 1}
_THOUSANDS = re.compile(r"^-?\d{1,3}(,\d{3})+(\.\d+)?$")


def metric_value(text: str, unit: str) -> float:
    """One ncu metric in base units (bytes, seconds, percent); NaN for 'n/a'."""
    text = text.strip()
    if _THOUSANDS.match(text):
        text = text.replace(",", "")
    try:
        value = float(text)
    except ValueError:
        return math.nan
    scale = UNIT_SCALE.get(unit.strip().lower())
    if scale is None:
        raise LabError(f"ncu metric unit {unit!r} is not one this parser knows ({', '.join(k for k in UNIT_SCALE if k)})")
    return value * scale


def parse_job(text: str) -> tuple[str, str, int, int]:
    """'phase:candidate:batch:n' -> (phase, candidate, batch, n); a malformed job is one clear line."""
    parts = text.split(":")
    if len(parts) != 4 or parts[0] not in PHASES or not parts[1]:
        raise LabError(f"job {text!r} is not PHASE:CANDIDATE:BATCH:N with PHASE one of {', '.join(PHASES)} "
                       "(e.g. prefill:fa3:1:16384)")
    try:
        batch, n = int(parts[2]), int(parts[3])
    except ValueError:
        raise LabError(f"job {text!r}: BATCH and N must be whole numbers") from None
    if batch < 1 or n < 1:
        raise LabError(f"job {text!r}: BATCH and N must be at least 1")
    return parts[0], parts[1], batch, n


def query_rows(phase: str, n: int) -> int:
    """Query tokens per sequence in one call of a job of ``phase`` over ``n`` keys (a mixed job: its decoding ones)."""
    return n if phase in ("prefill", "backward") else min(CHUNK, n) if phase == "chunk" else 1


def job_sequences(phase: str, batch: int, n: int) -> list[tuple[int, int]]:
    """(query tokens, keys) of each sequence of one call: ``batch`` alike, and a mixed job's new prompts after its
    ``batch`` decoding sequences of ``n`` keys (:data:`MIXED_PROMPTS`, each attending to itself)."""
    alike = [(query_rows(phase, n), n)] * batch
    if phase == "mixed":
        prompts, tokens = MIXED_PROMPTS
        alike += [(tokens, tokens)] * prompts
    return alike


def parse_raw_csv(text: str) -> list[dict]:
    """Kernels of ``ncu --page raw --csv`` in launch order: [{"id", "name", "metrics": {name: (unit, value)}}].

    The raw page is one header row (ID, Kernel Name, ..., then one column per metric), one row of units,
    then a row per kernel. Lines that are not CSV records (``==PROF==`` messages, the program's output)
    are skipped; values that are not numbers (names, 'n/a') are kept only for the identity columns."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header, units, body = rows[0], rows[1] if len(rows) > 1 else [], rows[2:]
    if units and units[0].strip():       # no units row: every row after the header is a kernel
        body, units = rows[1:], [""] * len(header)
    name_col = header.index("Kernel Name") if "Kernel Name" in header else None
    identity = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Device",
                "CC", "Block Size", "Grid Size", "Function Name", "Demangled Name"}
    kernels = []
    for row in body:
        if not row or row[0] == "ID":
            continue
        metrics = {}
        for col, name in enumerate(header):
            if name in identity or col >= len(row):
                continue
            unit = units[col] if col < len(units) else ""
            try:
                value = metric_value(row[col], unit)
            except LabError:
                value = metric_value(row[col], "")
            if value == value:       # not NaN
                metrics[name] = (unit, value)
        kernels.append({"id": int(row[0]), "name": row[name_col] if name_col is not None else "", "metrics": metrics})
    return sorted(kernels, key=lambda k: k["id"])


def after_markers(kernels: list[dict], marker: str = MARKER) -> list[list[dict]]:
    """The kernels after each marker kernel, one list per profiled call (markers dropped)."""
    calls: list[list[dict]] = []
    for kernel in kernels:
        if marker in kernel["name"]:
            calls.append([])
        elif calls:
            calls[-1].append(kernel)
    return calls


def measured_jobs(child_log: str) -> list[str]:
    """The jobs the profiled child says it measured (its ``MEASURED <job>`` lines), in launch order."""
    return re.findall(r"^MEASURED (\S+)$", child_log, flags=re.M)


def long_rows(job: str, kernels: list[dict]) -> list[dict]:
    """One row per metric of each of one job's kernels: job, phase, candidate, batch, n, kernel_index, kernel,
    metric, unit, value."""
    phase, candidate, batch, n = parse_job(job)
    return [{"job": job, "phase": phase, "candidate": candidate, "batch": batch, "n": n, "kernel_index": i,
             "kernel": kernel["name"][:200], "metric": metric, "unit": unit, "value": value}
            for i, kernel in enumerate(kernels) for metric, (unit, value) in sorted(kernel["metrics"].items())]


def read_dataset(raw_text: str, child_log: str) -> list[dict]:
    """Long rows of a stored run: the profiled calls of ``raw.csv`` matched in order to the jobs that
    ``child.log`` says were measured. A count that does not match is a clear error, not a guess."""
    jobs, calls = measured_jobs(child_log), after_markers(parse_raw_csv(raw_text))
    if len(jobs) != len(calls):
        raise LabError(f"the counters' raw.csv holds {len(calls)} profiled calls but child.log names {len(jobs)} "
                       "measured jobs: the two files are not from one run")
    return [row for job, kernels in zip(jobs, calls, strict=True) for row in long_rows(job, kernels)]

"""Writing data safely, and reading it back: atomic files, JSON lines, provenance records.

The bottom layer of ``lab``: the measuring code writes through it and the results code reads
through it, so neither needs the other. Every dataset is a folder under ``data/`` holding a
``provenance.json`` and its tables.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from lab import REPO_ROOT, LabError

DATA_DIR = REPO_ROOT / "data"
LOCAL_DIR = DATA_DIR / "local"

_STR = (str,)
_OPT_STR = (str, type(None))
#: field -> accepted types. Fields that do not apply (vLLM for a kernel benchmark) are null, never absent.
PROVENANCE_FIELDS: dict[str, tuple[type, ...]] = {
    "kind": _STR,        # reference | vllm-sweep | kernels | hardware | census
    "gpu": _STR,
    "driver": _OPT_STR,
    "cuda": _OPT_STR,
    "torch": _OPT_STR,
    "triton": _OPT_STR,
    "vllm": _OPT_STR,
    "model": _OPT_STR,
    "dtype": _OPT_STR,
    "flags": (dict,),
    "date": _STR,        # ISO 8601 date or date-time
    "command": _STR,     # the exact command that produced the folder
}
KINDS = ("reference", "vllm-sweep", "kernels", "hardware", "census")
_TYPE_NAMES = {str: "a string", type(None): "null", dict: "an object"}


def _expected(types: tuple[type, ...]) -> str:
    return " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in types)


def validate_provenance(record: Any, where: Path | str) -> dict:
    """Check a provenance record; raise LabError naming the file, the field and what was expected."""
    if not isinstance(record, dict):
        raise LabError(f"{where}: expected a JSON object at the top level, found {type(record).__name__}")
    for field, types in PROVENANCE_FIELDS.items():
        if field not in record:
            raise LabError(f"{where}: field '{field}' is missing; expected {_expected(types)}")
        if not isinstance(record[field], types):
            raise LabError(f"{where}: field '{field}' is {json.dumps(record[field])[:60]}; expected {_expected(types)}")
    if record["kind"] not in KINDS:
        raise LabError(f"{where}: field 'kind' is {record['kind']!r}; expected one of {', '.join(KINDS)}")
    try:
        _dt.datetime.fromisoformat(record["date"].replace("Z", "+00:00"))
    except ValueError:
        raise LabError(f"{where}: field 'date' is {record['date']!r}; expected an ISO 8601 date such as 2026-11-30") from None
    if record["kind"] == "reference":
        source = record.get("source")
        if not isinstance(source, dict) or not source.get("title"):
            raise LabError(f"{where}: field 'source' must name the publication (an object with a 'title') for reference data")
    return record



def read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        raise LabError(f"{path}: file not found") from None
    except json.JSONDecodeError as exc:
        raise LabError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None


def read_jsonl(path: Path) -> list[dict]:
    """Read a JSON-lines file. A truncated last line (a run killed mid-write) is skipped."""
    rows = []
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if number == len(lines):
                continue
            raise LabError(f"{path}: line {number} is not valid JSON; expected one JSON object per line") from None
    return rows


def command_line() -> str:
    """The command that is running now, as a reader would type it."""
    argv = list(sys.argv)
    script = Path(argv[0]).resolve() if argv else None
    if script is not None and script.suffix == ".py" and script.is_relative_to(REPO_ROOT / "lab"):
        # `python -m lab.x.y` leaves the module's file path in argv[0]: write it back as a module
        module = script.relative_to(REPO_ROOT).with_suffix("").parts
        module = module[:-1] if module[-1] == "__main__" else module
        argv[0:1] = ["python", "-m", ".".join(module)]
    return " ".join(shlex.quote(a) for a in argv)


def new_provenance(kind: str, *, model: str | None = None, dtype: str | None = None,
                   flags: dict | None = None, command: str | None = None, **extra) -> dict:
    """A provenance record for a run made on this machine now (versions filled in by lab.env)."""
    from lab import env

    caps = env.detect()
    record = {
        "kind": kind,
        "gpu": caps.gpu or f"CPU ({caps.machine})",
        "driver": caps.driver, "cuda": caps.cuda, "torch": caps.torch, "triton": caps.triton, "vllm": caps.vllm,
        "model": model, "dtype": dtype, "flags": flags or {},
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "command": command or command_line(),
    }
    record.update(extra)
    return record


def write_atomic(path: Path, write) -> Path:
    """Call ``write(tmp_path)``, then move the file into place: a crash never leaves half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    write(tmp)
    os.replace(tmp, path)
    return path


def write_json_atomic(path: Path, obj: Any) -> Path:
    return write_atomic(path, lambda tmp: tmp.write_text(json.dumps(obj, indent=1) + "\n", encoding="utf-8"))


def write_provenance(folder: Path, record: dict) -> Path:
    validate_provenance(record, folder / "provenance.json")
    return write_json_atomic(Path(folder) / "provenance.json", record)


def write_csv(folder: Path, name: str, table) -> Path:
    return write_atomic(Path(folder) / name, lambda tmp: table.to_csv(tmp, index=False))


def append_jsonl(path: Path, record: dict) -> None:
    """Append one measurement and flush it to disk at once, so a crash loses nothing already measured."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")
        fh.flush()
        os.fsync(fh.fileno())

"""Cached datasets: find, load and validate them; write new ones with provenance.

Every dataset is a folder under ``data/`` holding a ``provenance.json`` and its tables
(CSV, JSON or JSONL). A reader's own runs go to ``data/local/`` (not committed) and are
loaded beside the committed ones. ``python -m lab datasets`` lists what is there.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shlex
import sys
from collections.abc import Iterable
from dataclasses import dataclass
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


def _read_json(path: Path) -> Any:
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


@dataclass
class Dataset:
    """One folder of cached results and its provenance."""

    path: Path
    provenance: dict

    @property
    def name(self) -> str:
        """Path relative to data/, e.g. 'reference/a10g-vllm0.11-qwen2.5-7b'."""
        try:
            return self.path.relative_to(DATA_DIR).as_posix()
        except ValueError:
            return self.path.as_posix()

    @property
    def gpu(self) -> str:
        return self.provenance["gpu"]

    @property
    def kind(self) -> str:
        return self.provenance["kind"]

    def file(self, name: str) -> Path:
        path = self.path / name
        if not path.exists():
            raise LabError(f"{path}: file not found in dataset {self.name}")
        return path

    def has(self, name: str) -> bool:
        return (self.path / name).exists()

    def json(self, name: str) -> Any:
        return _read_json(self.file(name))

    def jsonl(self, name: str) -> list[dict]:
        return read_jsonl(self.file(name))

    def csv(self, name: str, columns: Iterable[str] = ()):
        """Read a CSV table; ``columns`` lists the columns the caller needs."""
        import pandas as pd

        path = self.file(name)
        try:
            table = pd.read_csv(path)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise LabError(f"{path}: not a readable CSV table ({str(exc).splitlines()[0]})") from None
        missing = [c for c in columns if c not in table.columns]
        if missing:
            raise LabError(f"{path}: column '{missing[0]}' is missing; expected columns {', '.join(columns)}")
        return table


def load(name_or_path: str | os.PathLike) -> Dataset:
    """Load one dataset by its name under data/ (or any folder path) and validate its provenance."""
    path = Path(name_or_path)
    if not path.is_absolute() and not path.exists():
        path = DATA_DIR / path
    if not path.is_dir():
        raise LabError(f"{path}: no such dataset folder; run `python -m lab datasets` to list them")
    prov_path = path / "provenance.json"
    return Dataset(path=path, provenance=validate_provenance(_read_json(prov_path), prov_path))


def datasets(kind: str | None = None, root: Path = DATA_DIR) -> list[Dataset]:
    """Every dataset under ``root`` (committed and data/local/), optionally of one kind, sorted by name."""
    found = []
    for prov in sorted(root.rglob("provenance.json")):
        ds = load(prov.parent)
        if kind is None or ds.kind == kind:
            found.append(ds)
    return found


#: Columns of every ``sweep.csv`` (one row per backend arm and prompt length).
SWEEP_COLUMNS = ("arm", "backend", "target_len", "actual_len", "ttft_s", "prefill_ms_per_token", "itl_ms")


def load_sweeps(root: Path = DATA_DIR):
    """All vLLM prompt-length sweeps (published and measured) in one table.

    Adds ``dataset`` and ``gpu`` columns so explorers can offer the GPU as a choice.
    """
    import pandas as pd

    tables = []
    for ds in datasets(root=root):
        if ds.has("sweep.csv"):
            table = ds.csv("sweep.csv", SWEEP_COLUMNS)
            table.insert(0, "gpu", ds.gpu)
            table.insert(0, "dataset", ds.name)
            tables.append(table)
    if not tables:
        raise LabError(f"{root}: no sweep.csv in any dataset; run `python -m lab reference` first")
    return pd.concat(tables, ignore_index=True)


# --- writing -------------------------------------------------------------------------------------

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


# --- CLI -----------------------------------------------------------------------------------------

def add_arguments(parser) -> None:
    parser.add_argument("--kind", choices=KINDS, help="only datasets of this kind")


def main(args) -> int:
    for ds in datasets(kind=args.kind):
        p = ds.provenance
        print(f"{ds.name:55s} {p['kind']:11s} {p['gpu']:22s} {p['date'][:10]}  vLLM {p['vllm'] or '-'}")
    return 0

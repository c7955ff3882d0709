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
import tempfile
from pathlib import Path
from typing import Any

from lab import REPO_ROOT, LabError, env
from lab.cli import os_error_reason

DATA_DIR = REPO_ROOT / "data"
LOCAL_DIR = DATA_DIR / "local"

_STR = (str,)
_OPT_STR = (str, type(None))
#: field -> accepted types. Fields that do not apply (vLLM for a kernel benchmark) are null, never absent.
PROVENANCE_FIELDS: dict[str, tuple[type, ...]] = {
    "kind": _STR,        # one of KINDS
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
#: "device-log": what a batch of device runs printed, kept beside the datasets those runs wrote; "serving-race": the
#: server's attention steps, our kernels against FA3 (lab.measure.serving_race); "vllm-agreement": our kernels checked
#: against FA3 inside a server (lab.measure.vllm.agreement)
KINDS = ("reference", "vllm-sweep", "vllm-load", "kernels", "hardware", "census", "live-check", "device-log",
         "serving-race", "vllm-agreement")
#: The provenance format this lab writes and reads (a record without the field is version 1).
SCHEMA_VERSION = 1
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
    version = record.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION or isinstance(version, bool):
        raise LabError(f"{where}: field 'schema_version' is {json.dumps(version)[:20]}; this lab reads version "
                       f"{SCHEMA_VERSION}: update the lab (git pull) or rewrite the folder with this one")
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



def _read_text(path: Path) -> str:
    """A UTF-8 text file's contents; a missing, folder, unreadable or binary file is a LabError."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LabError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise LabError(f"{path}: is a folder, expected a file") from None
    except UnicodeDecodeError as exc:
        raise LabError(f"{path}: not UTF-8 text (byte {exc.start}); expected a JSON text file") from None
    except OSError as exc:
        raise LabError(f"{path}: cannot read: {os_error_reason(exc)}") from None


def parse_json(text: str | bytes, where: Path | str) -> Any:
    """JSON text as Python objects; malformed or too deeply nested JSON is a LabError naming ``where``
    (the decoder recurses once per level: ten thousand ``[`` exhaust Python's stack)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise LabError(f"{where}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise LabError(f"{where}: JSON nested too deeply to read; expected a flat record") from None


def read_json(path: Path) -> Any:
    """A JSON file (every JSON file the lab reads comes through here): one line naming it when it cannot be read."""
    return parse_json(_read_text(path), path)


def read_jsonl(path: Path, required: tuple[str, ...] = ()) -> list[dict]:
    """Read a JSON-lines file of objects. A truncated last line (a run killed mid-write) is skipped.

    ``required`` names fields every record must have; a line without one is a LabError naming it.
    """
    rows = []
    lines = _read_text(path).splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            if number == len(lines):
                continue
            raise LabError(f"{path}: line {number} is not valid JSON (or nested too deeply); "
                           "expected one JSON object per line") from None
        if not isinstance(row, dict):
            raise LabError(f"{path}: line {number} is {line.strip()[:40]}, not a JSON object; "
                           "expected one JSON object per line")
        missing = [f for f in required if f not in row]
        if missing:
            raise LabError(f"{path}: line {number} has no field '{missing[0]}'; "
                           f"expected records with {', '.join(required)}")
        rows.append(row)
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

    caps = env.detect()
    record = {
        "schema_version": SCHEMA_VERSION,
        "kind": kind,
        "gpu": caps.gpu or f"CPU ({caps.machine})",
        "driver": caps.driver, "cuda": caps.cuda, "torch": caps.torch, "triton": caps.triton, "vllm": caps.vllm,
        "model": model, "dtype": dtype, "flags": flags or {},
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "command": command or command_line(),
    }
    record.update(extra)
    return record


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: Permissions a new file gets (mkstemp makes its file private; the result should not be).
_FILE_MODE = 0o666 & ~_umask()


def _temp_prefix(path: Path) -> str:
    return f".{path.name}."


def _remove_stale_temps(path: Path) -> None:
    """Temporary files of ``path`` left by writers that were killed (their process is gone)."""
    for tmp in path.parent.glob(_temp_prefix(path) + "*.tmp"):
        pid = tmp.name[len(_temp_prefix(path)):].split(".", 1)[0]
        if pid.isdigit() and not alive(int(pid)):
            tmp.unlink(missing_ok=True)


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _fsync_path(path: Path, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    except OSError:
        if not directory:
            raise
        # some file systems cannot fsync a folder; the file itself is already on disk
    finally:
        os.close(fd)


def write_atomic(path: Path, write) -> Path:
    """Call ``write(tmp_path)``, then move the file into place: a crash never leaves half a file.

    The temporary file is unique (two writers of one path never share it), lives in the same folder
    (so the move is atomic), is flushed to disk before the move (the folder after it), and is removed
    if ``write`` fails. One left by a writer that was killed is removed by the next writer.
    """
    path = Path(path)
    if path.is_dir():
        raise LabError(f"{path}: is a folder; expected a file name to write")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_temps(path)
        fd, name = tempfile.mkstemp(prefix=f"{_temp_prefix(path)}{os.getpid()}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
    except OSError as exc:
        raise LabError(f"{path}: cannot write: {os_error_reason(exc)}") from None
    tmp = Path(name)
    try:
        write(tmp)
        os.chmod(tmp, _FILE_MODE)
        _fsync_path(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.filename is not None and Path(exc.filename) not in (tmp, path):
            raise                   # a fault of an input the writer reads (run_command names that path)
        raise LabError(f"{path}: cannot write: {os_error_reason(exc)}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_path(path.parent, directory=True)
    return path


def write_json_atomic(path: Path, obj: Any) -> Path:
    return write_atomic(path, lambda tmp: tmp.write_text(json.dumps(obj, indent=1) + "\n", encoding="utf-8"))


def write_provenance(folder: Path, record: dict) -> Path:
    validate_provenance(record, folder / "provenance.json")
    return write_json_atomic(Path(folder) / "provenance.json", record)


def write_csv(folder: Path, name: str, table) -> Path:
    return write_atomic(Path(folder) / name, lambda tmp: table.to_csv(tmp, index=False))


def append_jsonl(path: Path, record: dict) -> None:
    """Append one measurement and flush it to disk at once, so a crash loses nothing already measured.

    A run killed mid-write leaves a torn last line; before appending after it, the fragment is moved
    to ``<file>.torn`` (every complete record stays), so the file never gets a corrupt line inside.
    """
    path = Path(path)
    line = (json.dumps(record) + "\n").encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a+b") as fh:
            _end_with_a_whole_line(path, fh)
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:   # a full disk says no path of its own: name the file
        raise LabError(f"{path}: cannot append: {os_error_reason(exc)}") from None


def _end_with_a_whole_line(path: Path, fh) -> None:
    """If the file's last line has no newline (a torn write), finish it or set it aside in ``.torn``."""
    end = fh.seek(0, os.SEEK_END)
    if end == 0:
        return
    fh.seek(end - 1)
    if fh.read(1) == b"\n":
        return
    start = end
    while start > 0:                      # find the last newline, reading backwards in blocks
        block = min(1 << 20, start)
        fh.seek(start - block)
        chunk = fh.read(block)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            start = start - block + cut + 1
            break
        start -= block
    fh.seek(start)
    fragment = fh.read()
    try:
        whole = isinstance(json.loads(fragment), dict)
    except ValueError:
        whole = False
    if whole:                             # killed between the record and its newline: keep it
        fh.write(b"\n")
    else:
        torn = path.with_name(path.name + ".torn")
        with open(torn, "ab") as side:
            side.write(fragment + b"\n")
            side.flush()
            os.fsync(side.fileno())
        fh.truncate(start)
        print(f"note: {path}: the last line was cut off mid-write ({len(fragment):,} bytes); "
              f"moved it to {torn.name} and kept the {_count_lines(fh):,} complete records", file=sys.stderr)
    fh.flush()
    os.fsync(fh.fileno())


def _count_lines(fh) -> int:
    fh.seek(0)
    return sum(1 for line in fh if line.strip())


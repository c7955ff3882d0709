"""Cached datasets: find, load and validate them; write new ones with provenance.

Every dataset is a folder under ``data/`` holding a ``provenance.json`` and its tables
(CSV, JSON or JSONL). A reader's own runs go to ``data/local/`` (not committed) and are
loaded beside the committed ones. ``python -m lab datasets`` lists what is there.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab import LabError
from lab.cli import os_error_reason, path_arg
from lab.commands import command_now
from lab.store import DATA_DIR, KINDS, LOCAL_DIR, read_json, read_jsonl, validate_provenance  # noqa: F401  (LOCAL_DIR: part of this module's face)


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
        return read_json(self.file(name))

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
        except OSError as exc:
            raise LabError(f"{path}: cannot read: {os_error_reason(exc)}") from None
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
    return Dataset(path=path, provenance=validate_provenance(read_json(prov_path), prov_path))


def scan(kind: str | None = None, root: Path = DATA_DIR) -> tuple[list[Dataset], list[tuple[Path, str]]]:
    """Every dataset under ``root``, and every folder that is no usable dataset, with the reason.

    A folder is broken when its provenance cannot be read or is not valid, when one of its shared tables
    (:data:`TABLES`) lacks a column its readers need or holds text where numbers belong, when it holds data
    files but no provenance, or when it cannot be read at all. One broken folder (a reader's half-copied
    run, say) must not hide the others, and is never silently skipped: ``python -m lab datasets`` lists it.
    """
    found, broken = [], []
    for folder, problem in _walk(Path(root)):
        if problem is not None:
            broken.append((folder, problem))
            continue
        try:
            ds = load(folder)
            for name, columns in TABLES.items():
                if ds.has(name):
                    check_table(ds.path / name, columns)
        except LabError as exc:
            broken.append((folder, str(exc)))
            continue
        if kind is None or ds.kind == kind:
            found.append(ds)
    return found, broken


def datasets(kind: str | None = None, root: Path = DATA_DIR) -> list[Dataset]:
    """Every readable dataset under ``root`` (committed and data/local/), optionally of one kind, sorted by name.

    Broken folders are left out; ``python -m lab datasets`` lists them with the reason, and every explorer
    names them (:func:`skipped_note`).
    """
    return scan(kind, root)[0]


#: Files that make a folder hold data (and so need a provenance.json in it or above it).
_DATA_SUFFIXES = (".csv", ".jsonl", ".json", ".gz", ".log")


def _walk(root: Path):
    """(folder, None) for every folder holding a provenance.json; (folder, why) for an unreadable folder and
    for one holding data files with no provenance.json in it or above it (a model's config.json is no data)."""
    unreadable: list[tuple[Path, str]] = []

    def note(exc: OSError) -> None:
        unreadable.append((Path(exc.filename), f"cannot be read: {os_error_reason(exc)}"))

    covered: list[Path] = []
    for here, dirs, files in os.walk(root, onerror=note):
        dirs.sort()
        folder = Path(here)
        if "provenance.json" in files or "provenance.json" in dirs:   # a folder of that name: load() says so
            covered.append(folder)
            yield folder, None
        elif not any(folder.is_relative_to(c) for c in covered) and any(
                f.endswith(_DATA_SUFFIXES) and f != "config.json" and not f.startswith(".") for f in files):
            yield folder, ("no provenance.json: data files without a record of how they were made; "
                           "rerun the command that wrote them, or move them out of data/")
    yield from unreadable


#: Columns of every ``sweep.csv`` (one row per backend arm and prompt length).
SWEEP_COLUMNS = ("arm", "backend", "target_len", "actual_len", "ttft_s", "prefill_ms_per_token", "itl_ms")
#: Tables read across every dataset that holds one, and the columns all their readers need.
TABLES = {
    "sweep.csv": SWEEP_COLUMNS,
    "concurrency.csv": ("arm", "context", "concurrency", "admitted", "itl_ms", "decode_tok_s", "window_s", "steps", "ok"),
    "census.csv": ("phase", "tokens", "arm", "metric", "value", "unit"),
    "prefill.csv": ("candidate", "n", "status", "ms"),
    "decode.csv": ("candidate", "batch", "n", "status", "ms"),
}
#: Columns that hold numbers (or nothing) wherever they appear in those tables.
NUMERIC_COLUMNS = ("target_len", "actual_len", "ttft_s", "prefill_ms_per_token", "itl_ms", "context", "concurrency",
                   "admitted", "decode_tok_s", "window_s", "steps", "tokens", "value", "n", "batch", "ms")
_CHECKED: dict[tuple, str | None] = {}   # (path, mtime, size) -> problem: a table is read once per version


def check_table(path: Path, columns: Iterable[str]) -> None:
    """A LabError naming the table and the column when ``path`` lacks one of ``columns`` or a numeric column
    holds text; a table read once is not read again until it changes."""
    import pandas as pd

    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size, tuple(columns))
    if key not in _CHECKED:
        try:
            table = Dataset(path.parent, {}).csv(path.name, columns)
            bad = next((c for c in NUMERIC_COLUMNS if c in table.columns and
                        (pd.to_numeric(table[c], errors="coerce").isna() & table[c].notna()).any()), None)
            _CHECKED[key] = None if bad is None else f"{path}: column '{bad}' holds text where numbers belong"
        except LabError as exc:
            _CHECKED[key] = str(exc)
    if _CHECKED[key] is not None:
        raise LabError(_CHECKED[key])


def skipped_note(root: Path | None = None, holding: str | None = None) -> str:
    """One sentence naming the broken folders under ``root`` (default data/) that hold the table ``holding``
    (any, by default) and why no explorer shows them; "" when there are none."""
    broken = [(folder, reason) for folder, reason in scan(root=Path(root or DATA_DIR))[1]
              if holding is None or (folder / holding).exists()]
    if not broken:
        return ""
    names = "; ".join(f"{_name(folder)} ({reason.split(': ', 1)[-1][:120]})" for folder, reason in broken[:3])
    more = f" and {len(broken) - 3} more" if len(broken) > 3 else ""
    return f"Not shown, because the folder is broken: {names}{more}. `python -m lab datasets` lists them."


def _name(folder: Path) -> str:
    try:
        return Path(folder).relative_to(DATA_DIR).as_posix()
    except ValueError:
        return str(folder)


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


# --- CLI -----------------------------------------------------------------------------------------

def made_by(root: Path = DATA_DIR) -> list[dict]:
    """Every committed data folder under ``root`` (a reader's own runs under data/local/ left out) with the command
    that made it, from its provenance.json: folder (relative to ``root``), kind, date (UTC, to the minute),
    command (as it was run and recorded), now (the same command as it is spelled today,
    :func:`lab.commands.command_now`: a script that became a ``python -m lab`` command, a module renamed), and the
    code's commit where the run recorded one ("" otherwise)."""
    rows = []
    for ds in datasets(root=root):
        folder = ds.path.relative_to(root).as_posix()
        if folder == "local" or folder.startswith("local/"):
            continue
        p = ds.provenance
        rows.append({"folder": folder, "kind": p["kind"], "date": str(p.get("date", ""))[:16].replace("T", " "),
                     "command": str(p.get("command", "")), "now": command_now(str(p.get("command", ""))),
                     "code": str(p.get("code", "")).removeprefix("commit ")})
    return rows


def add_arguments(parser) -> None:
    parser.add_argument("--kind", choices=KINDS, help="only datasets of this kind")
    parser.add_argument("--root", type=path_arg, default=DATA_DIR, help="folder to search (default: %(default)s)")
    parser.add_argument("--commands", action="store_true",
                        help="print a Markdown table of every committed data folder and the command that made it")


def main(args) -> int:
    if not args.root.is_dir():
        raise LabError(f"--root {args.root}: {'is a file' if args.root.exists() else 'no such folder'}; "
                       "expected the data folder (default data/)")
    if args.commands:
        print("| data folder | kind | date (UTC) | command (as run) | command now |\n| --- | --- | --- | --- | --- |")
        for row in made_by(args.root):
            if args.kind in (None, row["kind"]):
                run, now = (row[key].replace("|", "\\|") for key in ("command", "now"))  # a pipe would end the cell
                print(f"| `data/{row['folder']}` | {row['kind']} | {row['date']} | `{run}` | "
                      f"{'same' if now == run else f'`{now}`'} |")
        return 0
    found, broken = scan(kind=args.kind, root=args.root)
    for ds in found:
        p = ds.provenance
        print(f"{ds.name:55s} {p['kind']:11s} {p['gpu']:22s} {p['date'][:10]}  vLLM {p['vllm'] or '-'}")
    for folder, reason in broken:
        print(f"BROKEN {folder}: {reason}")
    if broken:
        print(f"error: {len(broken)} folder(s) under {args.root} are broken (listed above with the reason)", file=sys.stderr)
        return 1
    return 0

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
    """Every dataset under ``root``, and every folder whose provenance cannot be read (with the reason).

    One broken folder (a reader's half-copied run, say) must not hide all the others.
    """
    found, broken = [], []
    for prov in sorted(root.rglob("provenance.json")):
        try:
            ds = load(prov.parent)
        except LabError as exc:
            broken.append((prov.parent, str(exc)))
            continue
        if kind is None or ds.kind == kind:
            found.append(ds)
    return found, broken


def datasets(kind: str | None = None, root: Path = DATA_DIR) -> list[Dataset]:
    """Every readable dataset under ``root`` (committed and data/local/), optionally of one kind, sorted by name.

    Folders with a broken provenance are left out; ``python -m lab datasets`` lists them with the reason.
    """
    return scan(kind, root)[0]


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


# --- CLI -----------------------------------------------------------------------------------------

def add_arguments(parser) -> None:
    parser.add_argument("--kind", choices=KINDS, help="only datasets of this kind")
    parser.add_argument("--root", type=Path, default=DATA_DIR, help="folder to search (default: %(default)s)")


def main(args) -> int:
    found, broken = scan(kind=args.kind, root=args.root)
    for ds in found:
        p = ds.provenance
        print(f"{ds.name:55s} {p['kind']:11s} {p['gpu']:22s} {p['date'][:10]}  vLLM {p['vllm'] or '-'}")
    for folder, reason in broken:
        print(f"BROKEN {folder}: {reason}")
    if broken:
        print(f"error: {len(broken)} dataset folder(s) have an unreadable provenance.json (listed above)", file=sys.stderr)
        return 1
    return 0

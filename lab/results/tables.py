"""Print the tables a run wrote, whole, at the end of a GPU study's console (so the console alone says what came back).

    python -m lab tables --root /tmp/teaching dram-bytes/dram_bytes.csv:candidate,n,kernel_ms value-dependence/values.csv
    python -m lab tables --root /tmp/parts --drop ms_rounds paged-decode/paged.csv

Each TABLE is a CSV file under ``--root``, optionally followed by ``:`` and the columns to show. A table
that is not there is a line saying so ("not measured"), not a failure: a study cut short still prints the rest.
"""

from __future__ import annotations

from pathlib import Path

from lab import LabError
from lab.cli import path_arg


def table_text(path: Path, columns: list[str] | None = None, drop: tuple[str, ...] = ()) -> str:
    """One CSV file as text: every row, the chosen columns (all, less ``drop``), numbers to 4 decimals."""
    import pandas as pd

    table = pd.read_csv(path).drop(columns=list(drop), errors="ignore")
    if columns:
        missing = [c for c in columns if c not in table.columns]
        if missing:
            raise LabError(f"{path}: no column {missing[0]!r}; it has {', '.join(table.columns)}")
        table = table[columns]
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        return table.round(4).to_string(index=False)


def add_arguments(parser) -> None:
    parser.add_argument("tables", nargs="+", metavar="TABLE[:COLUMNS]",
                        help="a CSV file under --root, optionally with ':' and comma-separated columns")
    parser.add_argument("--root", type=path_arg, default=Path("."), help="the folder the tables lie under (default .)")
    parser.add_argument("--drop", default="", help="comma-separated columns to leave out of every table")


def main(args) -> int:
    drop = tuple(c for c in args.drop.split(",") if c)
    for spec in args.tables:
        name, _, columns = spec.partition(":")
        path = args.root / name
        print(f"== {name}")
        if not path.is_file():
            print("   (not measured)")
            continue
        print(table_text(path, [c for c in columns.split(",") if c] or None, drop))
    return 0

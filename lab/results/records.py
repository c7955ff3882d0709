"""Which run of a repeated measurement the book reads (its run of record), and the other runs kept on file.

A measurement made more than once keeps every run (the appendix shows how much it moved), but the
chapters quote one. A number quoted from another run must say so: the page that quotes it names that
run's folder. The book's consistency test (tests/test_consistency.py) holds every page to this table,
and to the folders it names wherever a page says "run of record".
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.results import kernel_runs


@dataclass(frozen=True)
class Record:
    """One repeated measurement: the folders under data/ the chapters read, and its other runs."""

    measurement: str
    record: tuple[str, ...]   # the run of record and the repeats made right after it (e.g. h200/kernels)
    others: tuple[str, ...]   # earlier or later runs of the same measurement, kept for comparison
    names: tuple[str, ...] = ()  # words by which the prose may name the other runs instead of their folders

    def run_of(self, folder: str) -> str | None:
        """'record' or 'other' for a folder under data/ (or a file or glob inside one), None if not this measurement."""
        folder = folder.removeprefix("data/")
        for kind, roots in (("other", self.others), ("record", self.record)):
            if any(folder == root or folder.startswith(f"{root}/") or folder.startswith(f"{root}*") for root in roots):
                return kind
        return None


RECORDS = (
    Record("H200 kernel benchmark", (kernel_runs.RECORD, kernel_runs.RECORD_REPEATS), (kernel_runs.CONTIGUOUS,),
           names=("in single blocks", "one block per candidate", "block-timed")),
    Record("H200 live check of the chapters", ("h200/live-check/run",), ("h200/live-check/rerun-05b",)),
)


def record_of(folder: str) -> tuple[Record, str] | None:
    """The measurement a data folder (or file, or glob) belongs to and whether it is its record, or None."""
    for record in RECORDS:
        kind = record.run_of(folder)
        if kind is not None:
            return record, kind
    return None

"""The kernel benchmark's stored runs: which run the chapters read, its repeats, and their tables.

Pure functions over ``data/<gpu>/kernels*`` folders written by ``python -m lab bench``.
"""

from __future__ import annotations

from pathlib import Path

from lab import LabError
from lab.results import data


def bars_over_runs(runs: dict):
    """The bars of several runs side by side: ``runs`` maps a run's name to its bars table (bars.csv).

    One column of ratios per run, then ``measured`` and ``met`` (in how many runs), and ``worst``. A
    bar a run did not measure (an empty ratio) counts neither way.
    """
    if not runs:
        raise LabError("bars_over_runs needs at least one run")
    wide = None
    for name, table in runs.items():
        column = table[["bar", "need", "ratio"]].rename(columns={"ratio": name})
        wide = column if wide is None else wide.merge(column, on=["bar", "need"], how="outer")
    ratios = wide[list(runs)]
    wide["measured"] = ratios.notna().sum(axis=1)
    wide["met"] = ratios.ge(wide["need"], axis=0).sum(axis=1)
    wide["worst"] = ratios.min(axis=1)
    order = {bar: i for i, bar in enumerate(next(iter(runs.values())).bar)}
    return wide.sort_values("bar", key=lambda col: col.map(lambda b: order.get(b, len(order)))).reset_index(drop=True)


def launch_words(config: str) -> str:
    """A tuned-kernel launch as recorded in a table ('BLOCK_M=128 BLOCK_N=64 num_warps=8 ...') in words."""
    try:
        keys = dict(item.split("=", 1) for item in config.split())
        words = [f"{keys['BLOCK_M']}×{keys['BLOCK_N']} tiles", f"{keys['num_warps']} warps", f"{keys['num_stages']} stages"]
    except (KeyError, ValueError):
        raise LabError(f"not a recorded launch of the tuned kernel: {config!r}") from None
    if keys.get("maxnreg", "None") != "None":
        words.append(f"at most {keys['maxnreg']} registers")
    if "tma" in keys:
        words.append("TMA loads" if keys["tma"] == "True" else "pointer loads")
    return ", ".join(words)


def stored_runs(folder: str, root: Path | None = None) -> dict:
    """The bench runs stored under data/``folder``, labelled for a table: the folder itself or its
    ``bench`` subfolder is the "bench run", subfolders ``run1``, ``run2``... are "repeat 1", "repeat 2"...
    (label -> lab.results.data.Dataset)."""
    root = root or data.DATA_DIR
    runs, repeats = {}, {}
    for ds in data.datasets(kind="kernels", root=root):
        name = ds.path.relative_to(root).as_posix()
        if name in (folder, f"{folder}/bench"):
            runs["bench run"] = ds
        elif name.startswith(f"{folder}/run") and name.rsplit("/run", 1)[1].isdigit():
            repeats[int(name.rsplit("/run", 1)[1])] = ds
    runs |= {f"repeat {i}": repeats[i] for i in sorted(repeats)}
    if not runs:
        raise LabError(f"no bench runs under data/{folder}; run `python -m lab bench --out data/{folder}` on a GPU")
    return runs


#: The benchmark of record (the tables the chapters read) and the repeats made right after it.
RECORD, RECORD_REPEATS = "h200/kernels", "h200/kernels-repeats"


def runs_of_record(root: Path | None = None) -> dict:
    """The bench run the chapters read, then its repeats where they exist (label -> Dataset)."""
    runs = stored_runs(RECORD, root)
    try:
        runs |= stored_runs(RECORD_REPEATS, root)
    except LabError:  # the bench run alone
        pass
    return runs


def prefill_rows(runs: dict, n: int, columns=("candidate", "n", "ms")):
    """Every run's prefill rows at ``n`` tokens in one table, with the run's label in ``run``."""
    import pandas as pd

    both = pd.concat([ds.csv("prefill.csv", columns).assign(run=label) for label, ds in runs.items()])
    return both[both.n == n]


def round_times(ms_rounds: str) -> list[float]:
    """A row's ``ms_rounds`` ('3.5872 3.6197 3.6067') as numbers."""
    return [float(x) for x in str(ms_rounds).split()]


def bars_sentence(table) -> str:
    """``bars_over_runs``' verdict in words: for each bar, in how many runs it was met and its lowest ratio."""
    parts = []
    for row in table.itertuples():
        if row.met == row.measured:
            parts.append(f"{row.bar}: met in all {row.measured} runs (lowest {row.worst:.2f})")
        else:
            parts.append(f"{row.bar}: met in {row.met} of {row.measured} runs (lowest {row.worst:.2f}, needs {row.need:g})")
    return "; ".join(parts) + "."

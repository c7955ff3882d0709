"""``python -m lab census``: print (and optionally store) the census of traces, compare two, verify stored ones."""

from __future__ import annotations

import sys
from pathlib import Path

from lab import LabError, positive_int
from lab.cli import path_arg, positive_count
from lab.folders import check_output, dataset_lock
from lab.measure.census.rules import LAUNCHER_RULES, NAME_RULES
from lab.measure.census.summary import census, format_census, format_compare, verify_folder
from lab.store import write_json_atomic


def add_arguments(parser) -> None:
    parser.add_argument("traces", nargs="*", metavar="TRACE", type=path_arg, help="Chrome trace files (.json or .json.gz)")
    parser.add_argument("--json", metavar="OUT", type=path_arg, help="write the census as JSON (one trace: an object; "
                        "several: a list)")
    parser.add_argument("--phase", choices=("all", "prefill", "decode", "mixed"), default="all",
                        help="keep only kernels of engine steps of this phase (needs vLLM step annotations)")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"), type=path_arg, help="two windows side by side, B minus A per family")
    parser.add_argument("--top", type=positive_count, default=10, help="how many kernels to list (default 10)")
    parser.add_argument("--rules", action="store_true", help="print the name and launcher rules and exit")
    parser.add_argument("--verify", metavar="FOLDER", type=path_arg, help="recompute every stored trace's census in FOLDER and "
                        "compare it with the stored *.census.json (exit status 1 on a mismatch)")


def print_rules() -> None:
    print("name rules (first match wins; weak rules defer to the launcher):")
    for r in NAME_RULES:
        print(f"  {r.key:22s} {str(r.family):13s} {'strong' if r.strong else 'weak':6s} /{r.pattern}/  {r.reason}")
    print("launcher rules (innermost CPU op open at the kernel's launch):")
    for r in LAUNCHER_RULES:
        print(f"  {r.key:22s} {str(r.family):13s} /{r.pattern}/  {r.reason}")


def _verify(folder: Path) -> int:
    verdicts = verify_folder(folder)
    for window, verdict in verdicts:
        print(f"{window:24s} {verdict}")
    return 1 if any(v.startswith("MISMATCH") for _, v in verdicts) else 0


def main(args) -> int:
    positive_int("--top", args.top)
    if args.json:                                   # refused before minutes of reading, not after
        _check_json(Path(args.json), [*args.traces, *(args.compare or ())])
    if args.rules:
        print_rules()
        return 0
    if args.verify:
        return _verify(Path(args.verify))
    if not args.json:
        return _census(args)
    with dataset_lock(Path(args.json).parent, option="--json"):
        return _census(args)


def _check_json(out: Path, traces: list[str]) -> None:
    if out.is_dir():
        raise LabError(f"--json {out}: is a folder; expected a file name such as census.json")
    if out.is_symlink() and not out.exists():
        raise LabError(f"--json {out}: a symbolic link that leads nowhere (or back to itself); expected a file name")
    check_output(out, "--json", [("the trace", Path(t)) for t in traces])


def _census(args) -> int:
    if args.compare:
        a, b = (census(p, phase=args.phase, top=args.top) for p in args.compare)
        print(format_compare(a, b))
        if args.json:
            write_json_atomic(Path(args.json), {"a": a, "b": b})
        return 0
    if not args.traces:
        raise LabError("no trace given; usage: python -m lab census TRACE [TRACE...] (or --compare A B)")
    results = []
    for p in args.traces:
        c = census(p, phase=args.phase, top=args.top, progress=sys.stderr.isatty())
        results.append(c)
        print(format_census(c))
    if args.json:
        write_json_atomic(Path(args.json), results[0] if len(results) == 1 else results)
    return 0

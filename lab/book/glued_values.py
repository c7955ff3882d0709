"""Every value the chapters glue, read from the executed notebooks of a built site.

    python -m lab glued-values _build/jupyter_execute > before.json
    python -m lab glued-values _build/jupyter_execute --compare before.json

``--compare`` prints each glued name whose value changed, appeared or disappeared, and exits 1 if any did.
"""

from __future__ import annotations

import json
import sys

from lab import LabError
from lab.cli import path_arg
from lab.store import read_json


def glued(executed) -> dict[str, dict[str, str]]:
    """chapter -> glue name -> the text/plain (or text/html) the notebook recorded for it."""
    out = {}
    for path in sorted(executed.rglob("*.glue.json")):  # myst-nb writes each notebook's glue beside it
        values = {}
        for key, output in read_json(path).items():
            data = output.get("data", {})
            values[key] = data.get("text/plain") or data.get("text/html") or str(data.get("image/png", ""))[:40]
        out[path.name.removesuffix(".glue.json")] = values
    return out


def add_arguments(parser) -> None:
    parser.add_argument("executed", type=path_arg, help="the built site's jupyter_execute folder")
    parser.add_argument("--compare", type=path_arg, help="a JSON file written by this command before a change")


def main(args) -> int:
    if not args.executed.is_dir():
        raise LabError(f"{args.executed} is not a folder; build the site first (scripts/build_site.sh)")
    now = glued(args.executed)
    if not args.compare:
        json.dump(now, sys.stdout, indent=1, sort_keys=True)
        print()
        return 0
    before = read_json(args.compare)
    changed = 0
    for chapter in sorted(set(before) | set(now)):
        old, new = before.get(chapter, {}), now.get(chapter, {})
        same = sum(1 for k in old if k in new and old[k] == new[k])
        print(f"{chapter}: {same} of {len(old)} glued values unchanged")
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                changed += 1
                print(f"  {key}: {old.get(key, '(absent)')!s:.60} -> {new.get(key, '(absent)')!s:.60}")
    print(f"{changed} glued values differ")
    return 1 if changed else 0

"""Every value the chapters glue, read from the executed notebooks of a built site.

    python scripts/glued_values.py _build/jupyter_execute > before.json
    python scripts/glued_values.py _build/jupyter_execute --compare before.json

``--compare`` prints each glued name whose value changed, appeared or disappeared, and exits 1 if any did.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def glued(executed: Path) -> dict[str, dict[str, str]]:
    """chapter -> glue name -> the text/plain (or text/html) the notebook recorded for it."""
    out = {}
    for path in sorted(executed.rglob("*.glue.json")):  # myst-nb writes each notebook's glue beside it
        values = {}
        for key, output in json.loads(path.read_text(encoding="utf-8")).items():
            data = output.get("data", {})
            values[key] = data.get("text/plain") or data.get("text/html") or str(data.get("image/png", ""))[:40]
        out[path.name.removesuffix(".glue.json")] = values
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("executed", type=Path, help="the built site's jupyter_execute folder")
    parser.add_argument("--compare", type=Path, help="a JSON file written by this script before a change")
    args = parser.parse_args(argv)
    if not args.executed.is_dir():
        print(f"error: {args.executed} is not a folder; build the site first (scripts/build_site.sh)", file=sys.stderr)
        return 2
    now = glued(args.executed)
    if not args.compare:
        json.dump(now, sys.stdout, indent=1, sort_keys=True)
        print()
        return 0
    before = json.loads(args.compare.read_text(encoding="utf-8"))
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


if __name__ == "__main__":
    sys.exit(main())

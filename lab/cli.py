"""How every command ends (a LabError is one line and exit status 2, Ctrl-C is exit 130), and how sizes are read.

Shared by ``python -m lab`` and the modules that also run on their own (``python -m lab.measure.vllm.sweep``).
"""

from __future__ import annotations

import sys

from lab import LabError


def run_command(command_main, args) -> int:
    """Run one command's ``main(args)``: a LabError becomes one line and exit status 2, Ctrl-C exit 130."""
    try:
        return int(command_main(args) or 0)
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: results already written are kept", file=sys.stderr)
        return 130


def sizes(text: str, example: str = "1k,2k,4096") -> tuple[int, ...]:
    """Comma-separated positive integers, each optionally in units of 1024 with a ``k`` (``32k`` = 32768),
    of 1024² with an ``M`` or of 1024³ with a ``G`` (``256M``, ``4G``: buffer sizes in bytes)."""
    scale = {"k": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    try:
        values = tuple(int(x[:-1]) * scale[x[-1]] if x[-1] in scale else int(x)
                       for x in text.replace(" ", "").split(",") if x)
    except ValueError:
        raise LabError(f"expected comma-separated integers such as {example}; got {text!r}") from None
    if not values or min(values) <= 0:
        raise LabError(f"expected positive sizes such as {example}; got {text!r}")
    return values

"""How every command ends: a LabError is one line and exit status 2, Ctrl-C is exit 130.

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

"""lab: the code behind the book "Where FlashAttention wins in LLM serving".

Every chapter in ``book/`` is a thin layer of prose over calls into this package.
One concept per module; ``python -m lab --help`` lists the command-line tools.
"""

from pathlib import Path

__version__ = "0.1.0"

#: Root of the repository (the folder that holds ``lab/``, ``data/`` and ``book/``).
REPO_ROOT = Path(__file__).resolve().parent.parent


class LabError(Exception):
    """An error a user can act on. The CLI prints its message as one line and exits with status 2."""


def positive_int(name: str, value) -> int:
    """``value`` if it is a positive int (not a bool); else a LabError that names the argument."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise LabError(f"{name} must be a positive integer, got {value!r}")
    return value

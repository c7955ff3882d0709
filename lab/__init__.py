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

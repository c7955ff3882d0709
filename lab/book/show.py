"""Show the code a chapter teaches, by function object: the source of the very function that runs.

    show(teaching_kernel)             # a Triton kernel: the source of its Python function
    show(online_softmax, tiled_loop)  # several, one after another

In a notebook and on the built site the output is a Python code block (syntax highlighted, never
re-wrapped), so the page shows exactly what the tests check and the benchmark times. Nothing is cut
out of a file by comment markers: the unit shown is a function, a class or a module constant.
"""

from __future__ import annotations

import inspect
import textwrap

from lab import LabError


def source_of(obj) -> str:
    """The source of a function, class or method; of a Triton or Gluon ``@jit`` function, its Python
    function's (decorator included)."""
    target = getattr(obj, "fn", obj)  # triton.JITFunction / gluon's keep the Python function as .fn
    while hasattr(target, "__wrapped__"):
        target = target.__wrapped__
    try:
        return textwrap.dedent(inspect.getsource(target)).rstrip() + "\n"
    except (TypeError, OSError) as exc:
        raise LabError(f"cannot show the source of {obj!r}: {exc}") from None


class Shown:
    """Source code as a cell's output: a fenced Python block for the book and Jupyter, plain text elsewhere."""

    def __init__(self, sources: list[str]):
        self.sources = sources

    def _repr_markdown_(self) -> str:
        return "\n".join(f"```python\n{source}```\n" for source in self.sources)

    def __repr__(self) -> str:
        return "\n".join(self.sources)


def show(*objects) -> Shown:
    """The source of each object, in order, as one output."""
    if not objects:
        raise LabError("show() needs at least one function or class to show")
    return Shown([source_of(obj) for obj in objects])
